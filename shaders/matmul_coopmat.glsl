// matmul_coopmat.glsl: the cooperative-matrix prefill GEMM (GL_KHR_cooperative_matrix).
// Y[t][r] (+)= sum_k W[r][k] * X[t][k] for rows r < N and tokens t < M, as C = A·B with
// A = W (rows x K), B[k][t] = X[t][k] (X row-major is B column-major) and C (rows x tokens).
// One workgroup of 4 subgroups of 32 threads computes a 64-row x 64-token tile of C: each
// subgroup a 32x32 quarter as 2x2 16x16x16 fp16 products accumulated in fp32. Per 64-element
// step of K, each of the 128 threads dequantizes one 32-element unit of one weight row (dq32
// from dequant.glsl) into shared memory as fp16, all threads load the 64 tokens' 64
// activations as fp16, and the subgroups multiply the four 16-deep slices (two barriers per
// 16 products; with 32-element steps and half the threads idle in dequantization it was two
// per 8). Rows past N and
// tokens past M are zeros. The fp32 tile goes through shared memory to Y with bounds checks
// (and the accumulate flag). The including shader defines one weight type (see dequant.glsl);
// K is a multiple of 32 for every type.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { float x[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K;          // row length (elements), a multiple of 32
    uint N;          // rows
    uint M;          // tokens
    uint xStride;    // elements between tokens in X
    uint yStride;    // elements between tokens in Y
    uint accumulate; // 1: Y += W*X, 0: Y = W*X
} p;

#include "dequant.glsl"

const uint BM = 64u;      // rows per workgroup
const uint BN = 64u;      // tokens per workgroup
const uint BK = 64u;      // K per shared-memory step (two dequantization units)
const uint SK = BK + 8u;  // padded shared row stride in halves (144 bytes, 16-byte aligned)
const uint SC = BM + 4u;  // padded stride of the fp32 output tile

shared float16_t sa[BM * SK]; // weights: row r at r*SK (row-major A)
shared float16_t sb[BN * SK]; // activations: token t at t*SK (column-major B)
shared float sc[BN * SC];     // output: token t at t*SC (column-major C)

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint r0 = gl_WorkGroupID.x * BM;
    uint t0 = gl_WorkGroupID.y * BN;
    uint sr = (sg & 1u) * 32u; // this subgroup's rows within the tile
    uint st = (sg >> 1) * 32u; // and tokens

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[2][2];
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++)
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    uint units = p.K / 32u;
    uint rr = tid & (BM - 1u), hh = tid / BM; // the row and the unit of the step this thread dequantizes
    uint row = r0 + rr;
    uint rowBase = row * (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
    float v[32];
    for (uint u0 = 0u; u0 < units; u0 += BK / 32u) {
        barrier(); // the previous step's products have read sa/sb
        uint u = u0 + hh;
        if (row < p.N && u < units) {
            dq32(rowBase + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
        } else {
            [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = 0.0;
        }
        [[unroll]] for (uint i = 0u; i < 32u; i++) sa[rr * SK + hh * 32u + i] = float16_t(v[i]);
        // 64 tokens x 64 activations: 64 consecutive threads read one token's 64 floats.
        uint kbase = u0 * 32u;
        [[unroll]] for (uint j = 0u; j < (BN * BK) / 128u; j++) {
            uint idx = tid + 128u * j;
            uint t = idx / BK, kk = idx % BK;
            float xv = 0.0;
            if (t0 + t < p.M && kbase + kk < p.K) xv = x[(t0 + t) * p.xStride + kbase + kk];
            sb[t * SK + kk] = float16_t(xv);
        }
        barrier();
        [[unroll]] for (uint kh = 0u; kh < BK; kh += 16u) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a[2];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b[2];
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                coopMatLoad(a[i], sa, (sr + 16u * i) * SK + kh, SK, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0u; j < 2u; j++)
                coopMatLoad(b[j], sb, (st + 16u * j) * SK + kh, SK, gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                [[unroll]] for (uint j = 0u; j < 2u; j++)
                    acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
        }
    }
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++)
            coopMatStore(acc[i][j], sc, (st + 16u * j) * SC + sr + 16u * i, SC, gl_CooperativeMatrixLayoutColumnMajor);
    barrier();
    // Consecutive threads write consecutive rows of one token.
    for (uint idx = tid; idx < BM * BN; idx += 128u) {
        uint t = idx / BM, r = idx % BM;
        if (t0 + t < p.M && r0 + r < p.N) {
            uint o = (t0 + t) * p.yStride + r0 + r;
            float s = sc[t * SC + r];
            y[o] = p.accumulate != 0u ? y[o] + s : s;
        }
    }
}
