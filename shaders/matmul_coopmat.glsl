// matmul_coopmat.glsl: the cooperative-matrix prefill GEMM (GL_KHR_cooperative_matrix).
// Y[t][r] (+)= sum_k W[r][k] * X[t][k] for rows r < N and tokens t < M, as C = A·B with
// A = W (rows x K), B[k][t] = X[t][k] (X row-major is B column-major) and C (rows x tokens).
//
// One workgroup of 8 subgroups of 32 threads computes a 128-row x 128-token tile of C. The
// subgroups sit 2 (rows) x 4 (tokens): each owns 64 rows x 32 tokens, 4x2 16x16 fp32
// accumulators, so every 16-deep slice costs it 4 A and 2 B loads from shared memory for 8
// products. K advances 64 per step: each of the 256 threads dequantizes one 32-element unit of
// one weight row (dq32 from dequant.glsl) and converts 32 activations of one token, both into
// registers as fp16, while the subgroups multiply the step before from shared memory (one
// shared buffer, register double buffering: two barriers per 32 products). Rows past N and
// tokens past M are zeros. Accumulators go straight to Y where a 16x16 fragment lies inside
// it, and through a per-subgroup shared fragment with bounds checks at the edges (and the
// accumulate flag either way). The including shader defines one weight type (see
// dequant.glsl); K is a multiple of 32 for every type, and the token strides of X and Y are
// multiples of 4 (MatMul checks).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
// The tile: CM_BM rows x CM_BN tokens, CM_SGR x CM_SGT subgroups of 32 threads (defaults 128 x
// 128 and 2 x 4, the fastest of the shapes measured on the H200; see BenchmarkPrefillGEMMTiers).
#ifndef CM_BM
#define CM_BM 128
#define CM_BN 128
#define CM_SGR 2
#define CM_SGT 4
#endif
#define CM_THREADS (32 * CM_SGR * CM_SGT)
layout(local_size_x = CM_THREADS) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K;          // row length (elements), a multiple of 32
    uint N;          // rows
    uint M;          // tokens
    uint xStride;    // elements between tokens in X, a multiple of 4
    uint yStride;    // elements between tokens in Y
    uint accumulate; // 1: Y += W*X, 0: Y = W*X
} p;

#include "dequant.glsl"

const uint BM = CM_BM;      // rows per workgroup
const uint BN = CM_BN;      // tokens per workgroup
const uint NT = CM_THREADS; // threads
const uint NSG = NT / 32u;  // subgroups
const uint BK = 64u;        // K per step (two dequantization units)
const uint SK4 = BK / 4u + 2u; // padded shared row stride in f16vec4 (72 halves, 144 bytes)
const uint SG_ROWS = BM / CM_SGR; // rows per subgroup
const uint SG_TOKS = BN / CM_SGT; // tokens per subgroup
const uint FR = SG_ROWS / 16u, FT = SG_TOKS / 16u; // fragments per subgroup
const uint WPT = 2u * BM / NT; // weight units (32 elements) each thread dequantizes per step
const uint XPT = 2u * BN / NT; // 32-activation pieces each thread converts per step

shared f16vec4 sa[BM * SK4]; // weights: row r at r*SK4 (row-major A)
shared f16vec4 sb[BN * SK4]; // activations: token t at t*SK4 (column-major B)
shared float edge[NSG * 256u]; // one 16x16 fp32 fragment per subgroup, for tiles at the edges

// loadStep fetches step u0's weight units and activations into registers as fp16.
void loadStep(uint u0, uint tid, uint r0, uint t0, uint units, inout f16vec4 wa[WPT * 8u], inout f16vec4 xa[XPT * 8u]) {
    float v[32];
    [[unroll]] for (uint j = 0u; j < WPT; j++) {
        uint e = tid + NT * j;
        uint row = r0 + e % BM, u = u0 + e / BM;
        if (row < p.N && u < units) {
            dq32(row * (p.K / BLOCK_ELEMS) * BLOCK_BYTES + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
        } else {
            [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = 0.0;
        }
        [[unroll]] for (uint i = 0u; i < 8u; i++)
            wa[8u * j + i] = f16vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]);
    }
    [[unroll]] for (uint j = 0u; j < XPT; j++) {
        uint e = tid + NT * j;
        uint tok = t0 + e % BN, u = u0 + e / BN;
        bool in_ = tok < p.M && u < units;
        uint xb = tok * (p.xStride / 4u) + u * 8u;
        [[unroll]] for (uint i = 0u; i < 8u; i++) xa[8u * j + i] = in_ ? f16vec4(x4[xb + i]) : f16vec4(0.0);
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint r0 = gl_WorkGroupID.x * BM;
    uint t0 = gl_WorkGroupID.y * BN;
    uint sr = (sg % CM_SGR) * SG_ROWS; // this subgroup's rows within the tile
    uint st = (sg / CM_SGR) * SG_TOKS; // and tokens

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[FR][FT];
    [[unroll]] for (uint i = 0u; i < FR; i++)
        [[unroll]] for (uint j = 0u; j < FT; j++)
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    uint units = p.K / 32u;
    f16vec4 wa[WPT * 8u], xa[XPT * 8u];
    loadStep(0u, tid, r0, t0, units, wa, xa);
    for (uint u0 = 0u; u0 < units; u0 += BK / 32u) {
        barrier(); // the previous step's products have read sa/sb
        [[unroll]] for (uint j = 0u; j < WPT; j++) {
            uint e = tid + NT * j;
            [[unroll]] for (uint i = 0u; i < 8u; i++) sa[(e % BM) * SK4 + (e / BM) * 8u + i] = wa[8u * j + i];
        }
        [[unroll]] for (uint j = 0u; j < XPT; j++) {
            uint e = tid + NT * j;
            [[unroll]] for (uint i = 0u; i < 8u; i++) sb[(e % BN) * SK4 + (e / BN) * 8u + i] = xa[8u * j + i];
        }
        barrier();
        // The next step's data into registers while the subgroups multiply this one.
        if (u0 + BK / 32u < units) loadStep(u0 + BK / 32u, tid, r0, t0, units, wa, xa);
        [[unroll]] for (uint kh = 0u; kh < BK / 4u; kh += 4u) { // 16 elements = 4 f16vec4 per slice
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a[FR];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b[FT];
            [[unroll]] for (uint i = 0u; i < FR; i++)
                coopMatLoad(a[i], sa, (sr + 16u * i) * SK4 + kh, SK4, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0u; j < FT; j++)
                coopMatLoad(b[j], sb, (st + 16u * j) * SK4 + kh, SK4, gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (uint i = 0u; i < FR; i++)
                [[unroll]] for (uint j = 0u; j < FT; j++)
                    acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
        }
    }

    uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint i = 0u; i < FR; i++) {
        [[unroll]] for (uint j = 0u; j < FT; j++) {
            uint fr = r0 + sr + 16u * i, ft = t0 + st + 16u * j;
            if (fr >= p.N || ft >= p.M) continue;
            uint o = ft * p.yStride + fr;
            if (fr + 16u <= p.N && ft + 16u <= p.M) {
                if (p.accumulate != 0u) {
                    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> prev;
                    coopMatLoad(prev, y, o, p.yStride, gl_CooperativeMatrixLayoutColumnMajor);
                    acc[i][j] = acc[i][j] + prev;
                }
                coopMatStore(acc[i][j], y, o, p.yStride, gl_CooperativeMatrixLayoutColumnMajor);
            } else {
                coopMatStore(acc[i][j], edge, sg * 256u, 16u, gl_CooperativeMatrixLayoutColumnMajor);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                for (uint e = lane; e < 256u; e += 32u) {
                    uint t = e / 16u, r = e % 16u;
                    if (ft + t < p.M && fr + r < p.N) {
                        uint oe = (ft + t) * p.yStride + fr + r;
                        float s = edge[sg * 256u + e];
                        y[oe] = p.accumulate != 0u ? y[oe] + s : s;
                    }
                }
                subgroupBarrier(); // every lane has read the fragment before the next store
            }
        }
    }
}
