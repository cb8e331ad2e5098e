// moe_gemm.glsl: the grouped expert products of a prefill window: the pairs moe_group put
// together by expert are multiplied tile by tile, so each expert's weights are read once per
// tile of up to TM pairs instead of once per pair (moe_matvec.glsl). The products are
// moe_matvec's: Y[q·yStride + r] = Σ_k W_e[r][k] · X[xrow(q)·xStride + k] for every pair q of a
// tile of expert e, xrow = q (xPerPair) or q / used; W binds experts e0..e0+ne-1, a tile of
// another expert is left to the dispatch of its binding. X comes rounded for the weight type
// (quantact), W is expanded by dq32 (exact), sums in f32 in moe_matvec's order (each thread's
// units, then a shared-memory tree over the 64 threads): within the same bound of an f64
// reference (moe_test.go).
// A workgroup takes 64/LANES groups of NR rows of one tile (grid z: the tile, up to the bound
// the host dispatches; tiles past tiles[0] exit; LANES as moe_matvec's, the fewest of 16, 32
// and 64 that cover a row's units): each thread expands its 32-element units of its group's
// NR rows once and multiplies each with the TM pairs' units of x.
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
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
    uint rowsPerX; // row groups per grid line (gl_NumWorkGroups.x)
    uint lanes;    // threads per group of NR rows: 16, 32 or 64
} p;

#define IQ_GRIDS_SHARED // i-quant grids in shared memory (dequant_iq.glsl); other types ignore it
#include "dequant.glsl"

const uint NR = 2u;  // rows per workgroup
const uint TM = 16u; // pairs per tile (moeTilePairs in engine/vulkan/moe.go)
shared float part[NR * TM * 64u];

void main() {
#if defined(T_IQUANT)
    iqGridsLoad();
    barrier();
#endif
    uint t = gl_WorkGroupID.z;
    uint L = p.lanes;
    uint tid = gl_LocalInvocationID.x, lane = tid % L;
    uint wgRow0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * NR * (64u / L);
    uint row0 = wgRow0 + (tid / L) * NR;
    if (t >= tiles[0] || wgRow0 >= p.N) return; // uniform over the workgroup
    uint e = tiles[1u + 3u * t], first = tiles[2u + 3u * t], cnt = tiles[3u + 3u * t];
    if (e < p.e0 || e - p.e0 >= p.ne) return;
    uint rowBytes = (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
    uint base = (e - p.e0) * p.N * rowBytes;
    uint xb[TM];
    [[unroll]] for (uint j = 0u; j < TM; j++) {
        uint q = sorted[first + min(j, cnt - 1u)];
        xb[j] = (p.xPerPair != 0u ? q : q / p.used) * p.xStride / 4u;
    }
    float acc[NR * TM];
    [[unroll]] for (uint i = 0u; i < NR * TM; i++) acc[i] = 0.0;
    uint units = p.K / 32u;
    for (uint u = lane; u < units && row0 < p.N; u += L) {
        uint blk = (u / UNITS_PER_BLOCK) * BLOCK_BYTES, sub = u % UNITS_PER_BLOCK;
        [[unroll]] for (uint r = 0u; r < NR; r++) {
            uint row = min(row0 + r, p.N - 1u); // a row past the end re-reads the last (never written)
            float v[32];
            dq32(base + row * rowBytes + blk, sub, v);
            [[unroll]] for (uint j = 0u; j < TM; j++) {
                if (j < cnt) {
                    float s = 0.0;
                    [[unroll]] for (uint i = 0u; i < 8u; i++) s += dot(vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]), x4[xb[j] + 8u * u + i]);
                    acc[r * TM + j] += s;
                }
            }
        }
    }
    [[unroll]] for (uint i = 0u; i < NR * TM; i++) part[i * 64u + tid] = acc[i];
    barrier();
    for (uint s = L >> 1; s > 0u; s >>= 1) {
        if (lane < s) {
            [[unroll]] for (uint i = 0u; i < NR * TM; i++) part[i * 64u + tid] += part[i * 64u + tid + s];
        }
        barrier();
    }
    uint g0 = tid - lane; // the group's lane 0
    for (uint i = lane; i < NR * TM; i += L) {
        uint r = i / TM, j = i % TM;
        if (j < cnt && row0 + r < p.N) y[sorted[first + j] * p.yStride + row0 + r] = part[i * 64u + g0];
    }
}
