// moe_gemm_coopmat.glsl: moe_gemm.glsl's grouped expert products on KHR cooperative matrices.
// Each tile of up to BN pairs of one expert (moe_group's grouping) is multiplied by that
// expert's rows as fp16 16x16x16 products with fp32 accumulation, as matmul_coopmat.glsl
// multiplies a dense prefill window: Y[q·yStride + r] = Σ_k W_e[r][k] · X[xrow(q)·xStride + k]
// for every pair q of the tile, xrow = q (xPerPair) or q / used.
//
// One workgroup of 8 subgroups of 32 threads takes 128 rows of the expert and the tile's pairs,
// BN of them (MOE_BN: 32, or 64 for the _p64 variants; grid x: the row blocks, grid z: the tile
// and its part, up to the bound the host dispatches; tiles past tiles[0], parts past a tile's
// pairs and tiles of experts outside the W binding exit). With parts 2, the 32-pair kernels
// take a grouping of 64-pair tiles, a workgroup for each half. The subgroups sit 4 (rows) x 2
// (pairs): each owns 32 rows x BN/2 pairs, 16x16 accumulators two by BN/32. A tile of more
// pairs than parts·BN would lose the rest: the grouping's tiles are at most parts·BN. K
// advances 64 per step: each thread expands one 32-element unit of one weight row (dq32:
// thread t row t % 128, unit t / 128; under MOE_ROW_PAIRS, which the _p64 variants define,
// the two lanes of a pair take one row's two adjacent units, so a subgroup reads 16 runs of
// 64 elements' bytes and a Q4_K pair shares one sub-block pair's quants) and the first 2·BN
// threads convert 32 activations of one pair, into registers as fp16, while the subgroups
// multiply the step before from shared memory (one shared buffer, register double buffering).
// Rows past N and pairs past the tile's count are zeros; the products go to Y through a
// per-subgroup shared fragment, scattered to their pairs' rows. The including shader defines
// one weight type (see dequant.glsl); K is a multiple of 32 (and of the type's block).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(std430, binding = 3) readonly buffer Tb { uint tiles[]; };
layout(std430, binding = 4) readonly buffer Sb { uint sorted[]; };
layout(push_constant) uniform P {
    uint K;        // row length (elements, a multiple of 32)
    uint N;        // rows of one expert
    uint e0;       // first expert in the W binding
    uint ne;       // experts in the W binding
    uint used;     // pairs per token
    uint xPerPair; // 1: X row q, 0: X row q / used
    uint xStride;  // elements between X rows (a multiple of 4)
    uint yStride;  // elements between Y rows
    uint parts;    // workgroups per tile along z: a tile of up to parts·BN pairs, BN a part
} p;

#define IQ_GRIDS_SHARED // i-quant codebooks in shared memory: constant arrays indexed per lane serialize
#include "dequant.glsl"

const uint BM = 128u;          // rows per workgroup
#ifndef MOE_BN
#define MOE_BN 32
#endif
const uint BN = MOE_BN;        // pairs per tile (Context.moeCoopmatTile in engine/vulkan/moe.go)
const uint NT = 256u;          // threads
const uint BK = 64u;           // K per step (two dequantization units)
const uint SK4 = BK / 4u + 2u; // padded shared row stride in f16vec4
const uint FR = 2u;            // 16-row fragments per subgroup (32 rows)
const uint FC = BN / 32u;      // 16-pair fragments per subgroup (BN/2 pairs)

shared f16vec4 sa[BM * SK4]; // weights: row r at r*SK4 (row-major A)
shared f16vec4 sb[BN * SK4]; // activations: pair j at j*SK4 (column-major B)
shared float frag[8u * 256u]; // one 16x16 fp32 fragment per subgroup, for the scattered store

#include "moe_tile_mma.glsl"

void loadStep(uint u0, uint tid, uint r0, uint base, uint rowBytes, uint units, uint cnt, uint xrow,
              inout f16vec4 wa[8], inout f16vec4 xa[8]) {
#ifdef MOE_ROW_PAIRS
    uint row = r0 + tid / 2u, u = u0 + tid % 2u; // a lane pair takes a row's two units: one run of bytes
#else
    uint row = r0 + tid % BM, u = u0 + tid / BM;
#endif
    float v[32];
    if (row < p.N && u < units) {
        dq32(base + row * rowBytes + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
    } else {
        [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = 0.0;
    }
    [[unroll]] for (uint i = 0u; i < 8u; i++) wa[i] = f16vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]);
    if (tid < 2u * BN) { // uniform per subgroup
        uint j = tid % BN, ux = u0 + tid / BN;
        bool in_ = j < cnt && ux < units;
        uint xb = xrow * (p.xStride / 4u) + ux * 8u;
        [[unroll]] for (uint i = 0u; i < 8u; i++) xa[i] = in_ ? f16vec4(x4[xb + i]) : f16vec4(0.0);
    }
}

void main() {
#if defined(T_IQUANT)
    iqGridsLoad();
    barrier();
#endif
    uint parts = max(p.parts, 1u);
    uint t = gl_WorkGroupID.z / parts, skip = (gl_WorkGroupID.z % parts) * BN;
    uint tid = gl_LocalInvocationID.x;
    uint r0 = gl_WorkGroupID.x * BM;
    if (t >= tiles[0] || r0 >= p.N || skip >= tiles[3u + 3u * t]) return; // uniform over the workgroup
    uint e = tiles[1u + 3u * t], first = tiles[2u + 3u * t] + skip, cnt = min(tiles[3u + 3u * t] - skip, BN);
    if (e < p.e0 || e - p.e0 >= p.ne) return;
    uint rowBytes = (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
    uint base = (e - p.e0) * p.N * rowBytes;
    uint sg = gl_SubgroupID;
    uint sr = (sg % 4u) * 32u; // this subgroup's rows within the tile
    uint st = (sg / 4u) * (BN / 2u); // and pairs
    // The pair whose activations this thread converts (threads below 2·BN).
    uint jx = tid % BN;
    uint qx = sorted[first + min(jx, cnt - 1u)];
    uint xrow = p.xPerPair != 0u ? qx : qx / p.used;

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[FR * FC];
    [[unroll]] for (uint i = 0u; i < FR * FC; i++) acc[i] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    uint units = p.K / 32u;
    f16vec4 wa[8], xa[8];
    loadStep(0u, tid, r0, base, rowBytes, units, cnt, xrow, wa, xa);
    for (uint u0 = 0u; u0 < units; u0 += BK / 32u) {
        barrier(); // the previous step's products have read sa/sb
#ifdef MOE_ROW_PAIRS
        [[unroll]] for (uint i = 0u; i < 8u; i++) sa[(tid / 2u) * SK4 + (tid % 2u) * 8u + i] = wa[i];
#else
        [[unroll]] for (uint i = 0u; i < 8u; i++) sa[(tid % BM) * SK4 + (tid / BM) * 8u + i] = wa[i];
#endif
        if (tid < 2u * BN) {
            [[unroll]] for (uint i = 0u; i < 8u; i++) sb[(tid % BN) * SK4 + (tid / BN) * 8u + i] = xa[i];
        }
        barrier();
        if (u0 + BK / 32u < units) loadStep(u0 + BK / 32u, tid, r0, base, rowBytes, units, cnt, xrow, wa, xa);
        MOE_TILE_MUL_ADD(acc, sr, st)
    }

    MOE_TILE_STORE(acc, sg, r0, sr, st, first, cnt)
}
