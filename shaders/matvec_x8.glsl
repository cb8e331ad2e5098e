// matvec_x8.glsl: the decode product y[r] (+)= W[r]·x for one token on int8 dot products, with
// x rounded once per layer input by quantize_x8 (int8 blocks of 32 in a lane-interleaved
// layout, a scale and an integer sum a block). A subgroup takes NR rows a pass; its lanes stride
// over the row's 32-element units (a Q4_0/Q8_0 block, a Q4_K sub-block), load the unit's 32
// int8 of x as two 16-byte words that neighbouring lanes read from neighbouring addresses, and
// multiply them with the same unit of all NR rows: integer sums (dotPacked4x8EXT) are exact,
// each unit then adds d_w·d_x·sum in f32. A subgroup sum ends each row; on grids of few
// workgroups the workgroup's subgroups split K of NR rows and add in shared memory.
// With ROW_SPLIT (Q4_0, Q8_0) each row is stored as its quants, 16-byte aligned, then its f16
// scales (the same bytes per row as GGUF's blocks), so a lane loads its block in 16-byte words.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 0) readonly buffer W4b { uvec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { uvec4 xq4[]; };
layout(std430, binding = 2) readonly buffer Sb { vec2 xs[]; };
layout(std430, binding = 3) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K;          // row length (elements)
    uint N;          // rows
    uint rowsPerWG;  // rows per workgroup
    uint rowsPerX;   // workgroups per grid line (gl_NumWorkGroups.x)
    uint accumulate; // 1: y += W·x
    uint shareRows;  // 1: all subgroups of the workgroup split K of the same NR rows (rowsPerWG = NR)
} p;

#ifndef NR_ROWS
#define NR_ROWS 4u
#endif
const uint NR = NR_ROWS;

#include "x8_unit.glsl"

#include "matvec_rows.glsl"

void main() {
#if defined(T_IQUANT)
    iqGridsLoad();
    barrier();
#endif
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX;
    uint units = p.K / 32u, nb = units / UNITS_PER_BLOCK;
    uint rowBytes = nb * BLOCK_BYTES;
    bool share = p.shareRows != 0u;
    uint rFirst = share ? 0u : gl_SubgroupID * NR, rStep = share ? NR : gl_NumSubgroups * NR;
    uint uFirst = share ? gl_SubgroupID * lanes + lane : lane, uStep = share ? gl_NumSubgroups * lanes : lanes;
    for (uint r0 = rFirst; r0 < p.rowsPerWG; r0 += rStep) {
        uint row0 = wg * p.rowsPerWG + r0;
        if (row0 >= p.N) break;
        float acc[NR];
        [[unroll]] for (uint i = 0u; i < NR; i++) acc[i] = 0.0;
        for (uint u = uFirst; u < units; u += uStep) {
            uint xi = (u >> 5) * 64u + (u & 31u);
            uvec4 xa = xq4[xi], xb = xq4[xi + 32u];
            vec2 s = xs[u];
            [[unroll]] for (uint i = 0u; i < NR; i++) {
                uint r = min(row0 + i, p.N - 1u); // a past-the-end row re-reads the last (never written)
                acc[i] += unitDot(r * rowBytes, nb, u, xa, xb, s);
            }
        }
        finishRows(acc, row0, r0, share);
    }
}
