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
// With Q6K_WIDE (Q6_K: matvec_x8_q6_kw*) a lane takes 64 elements a step instead of one unit:
// positions 16·hh..16·hh+15 of the four 32-element quarters of one half of a superblock, whose
// low bits, high bits and scales sit in three 16-byte runs and four bytes of the block, so
// each weight byte is loaded once (a unit a lane loads each ql byte twice and each qh byte four
// times, two halves at a time where the 210-byte blocks leave it 2-byte aligned).
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
#ifdef CONV
    uint convK;      // the convolution's taps
#endif
#ifdef ROPE_KV
    uint headDim;    // rows per head
    uint ropeDim;    // the rotated rows of each head (its first ones, in adjacent pairs)
    uint mode;       // 0: queries, rotated into y; 1: keys, rotated into the f16 cache; 2: values into theirs
#endif
} p;

#ifdef ROPE_KV
// ROPE_KV (matvec_x8_<type>_rkv): the decode step's query, key or value product ends as rope_kv
// does (its arithmetic: each product rounded before the sum, values rounded to f16 with
// roundHalf), for one token: each pair of adjacent rows (NR is even) rotated by the pair's
// (cos, sin), keys and values packed to f16 into the cache row pos[0] (y bound to the cache).
layout(std430, binding = 3) buffer Yu { uint yu[]; };
layout(std430, binding = 4) readonly buffer Cb { float cs[]; };
layout(std430, binding = 5) readonly buffer Pb { uint pos[]; };
#include "exact.glsl" // roundHalf
#include "rope_pair.glsl"

void storePair(uint r, float a, float b) {
    uint j = r % p.headDim; // r is even, so is j: the pair stays in one head
    if (p.mode != 2u && j < p.ropeDim) {
        uint i = j / 2u;
        float c = cs[2u * i], s = cs[2u * i + 1u];
        vec2 rot = ropePair(a, b, c, s);
        a = rot.x;
        b = rot.y;
    }
    if (p.mode == 0u) {
        y[r] = a;
        y[r + 1u] = b;
    } else {
        yu[(pos[0] * p.N + r) / 2u] = packHalf2x16(vec2(roundHalf(a), roundHalf(b)));
    }
}
#endif

#ifdef CONV
// CONV (matvec_x8_<type>_conv): the decode step's Gated DeltaNet qkv product ends as ssm_conv
// does for one token (its arithmetic: each product rounded before the sum, a correctly rounded
// exp and division): row r is channel r, y[r] = silu(Σ_t state[t][r]·w[r][t] + v·w[r][K-1])
// over its last K-1 inputs (the state, oldest first) and the product v, and the state moves on
// by one with v as its newest input. One stage fewer than ssm_conv's a decode step.
layout(std430, binding = 4) readonly buffer CWb { float cw[]; }; // N × K taps, the oldest input's first
layout(std430, binding = 5) buffer CSb { float cst[]; };         // (K-1) × N: every channel's last K-1 inputs
#include "exact.glsl" // expExact, divExact

void storeRowConv(uint r, float v) {
    uint n = p.convK - 1u;
    precise float sum = 0.0;
    for (uint t = 0u; t < n; t++) {
        precise float pr = cst[t * p.N + r] * cw[r * p.convK + t];
        sum = sum + pr;
    }
    precise float last = v * cw[r * p.convK + n];
    sum = sum + last;
    for (uint t = 0u; t + 1u < n; t++) cst[t * p.N + r] = cst[(t + 1u) * p.N + r];
    if (n > 0u) cst[(n - 1u) * p.N + r] = v;
    precise float e = 1.0 + expExact(-sum);
    y[r] = divExact(sum, e);
}
#define STORE_ROW(r, sum) storeRowConv(r, sum)
#endif

#ifndef NR_ROWS
#define NR_ROWS 4u
#endif
const uint NR = NR_ROWS;

#if defined(COOP_LOAD)
// COOP_LOAD (Q4_0, Q8_0 and Q6_K: matvec_x8_<type>c*): their blocks (18, 34 and 210 bytes)
// start 2-byte aligned in GGUF's layout, so a lane's own loads are 4-byte words or pairs of
// halves (a layout of quants then scales, read in 16-byte words, read Q8_0 2x faster: PERF.md
// session 7, but the GEMMs read GGUF's). Here a subgroup first copies the run of blocks its
// lanes are about to take, row by row, into shared memory in 16-byte words (consecutive lanes,
// consecutive words), and the unit's readers (x8_unit.glsl) read the copy: the same sums in
// the same order as the kernel without it.
#if defined(T_Q8_0)
const uint COOP_BB = 34u, COOP_UPB = 1u;   // block bytes, 32-element units a block
#elif defined(T_Q4_0)
const uint COOP_BB = 18u, COOP_UPB = 1u;
#elif defined(T_Q6_K)
const uint COOP_BB = 210u, COOP_UPB = 8u;
#else
#error "matvec_x8.glsl: COOP_LOAD takes T_Q4_0, T_Q8_0 or T_Q6_K"
#endif
// a row's words: the runs of the workgroup's 128 lanes, and up to four more a subgroup (16 at most)
const uint COOP_ROW = 128u / COOP_UPB * COOP_BB / 16u + 64u;
shared uvec4 coopRun[NR * COOP_ROW];
uint coopRegion; // the word of coopRun the row being read starts at

uint coopWord(uint i) { return coopRun[coopRegion + (i >> 2)][i & 3u]; }
uint coopLoad4(uint off) {
    uint i = off >> 2;
    return (off & 2u) == 0u ? coopWord(i) : (coopWord(i) >> 16) | (coopWord(i + 1u) << 16);
}
float coopF16(uint off) {
    uint v = coopWord(off >> 2);
    return unpackHalf2x16((off & 2u) != 0u ? v >> 16 : v).x;
}
int coopS8(uint off) { return int(coopWord(off >> 2) << (24u - 8u * (off & 3u))) >> 24; }
#define X8_WORD(i) coopWord(i)
#define X8_LOAD4(o) coopLoad4(o)
#define X8_F16AT(o) coopF16(o)
#define X8_S8(o) coopS8(o)

// wordAt is the weights' 16-byte word g (the binding's last, partial word from its 4-byte words).
uvec4 wordAt(uint g) {
    if (g < uint(w4.length())) return w4[g];
    uvec4 v = uvec4(0u);
    [[unroll]] for (uint i = 0u; i < 4u; i++) if (4u * g + i < uint(w.length())) v[i] = w[4u * g + i];
    return v;
}
#endif

#include "x8_unit.glsl"

#include "matvec_rows.glsl"


void main() {
#if defined(T_IQUANT)
    x8TablesLoad();
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
#if defined(COOP_LOAD)
        uint region = gl_SubgroupID * ((lanes / COOP_UPB * COOP_BB + 15u) / 16u + 3u);
        for (uint ub = uFirst - lane; ub < units; ub += uStep) { // ub: the subgroup's run's first unit (a whole block's)
            uint u = ub + lane, cnt = min(lanes, units - ub);
            [[unroll]] for (uint i = 0u; i < NR; i++) {
                uint start = min(row0 + i, p.N - 1u) * rowBytes + ub / COOP_UPB * COOP_BB;
                uint a0 = start >> 4, nv = ((start + (cnt + COOP_UPB - 1u) / COOP_UPB * COOP_BB + 15u) >> 4) - a0;
                for (uint v = lane; v < nv; v += lanes) coopRun[i * COOP_ROW + region + v] = wordAt(a0 + v);
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            if (u < units) {
                uint xi = (u >> 5) * 64u + (u & 31u);
                uvec4 xa = xq4[xi], xb = xq4[xi + 32u];
                vec2 s = xs[u];
                [[unroll]] for (uint i = 0u; i < NR; i++) {
                    uint start = min(row0 + i, p.N - 1u) * rowBytes + ub / COOP_UPB * COOP_BB;
                    coopRegion = i * COOP_ROW + region;
                    // the run's first byte is byte start & 15 of the copy: unitDot's row starts
                    // that far before it (wrapping), so unit u's block lands where it was copied
                    acc[i] += unitDot((start & 15u) - ub / COOP_UPB * COOP_BB, nb, u, xa, xb, s);
                }
            }
            subgroupBarrier(); // every lane has read the run before the next one is copied
        }
#elif defined(Q6K_WIDE)
        // a lane takes chunk c: 16 elements of each of the four units of half h of superblock
        // b (q6kChunkDot), with those units' 16-element halves hh of x
        for (uint c = uFirst; c < 4u * nb; c += uStep) {
            uint b = c >> 2, h = (c >> 1) & 1u, hh = c & 1u, u0 = 8u * b + 4u * h;
            uvec4 xw[4];
            vec2 xsc[4];
            [[unroll]] for (uint k = 0u; k < 4u; k++) {
                uint u = u0 + k;
                xw[k] = xq4[(u >> 5) * 64u + (u & 31u) + 32u * hh];
                xsc[k] = xs[u];
            }
            [[unroll]] for (uint i = 0u; i < NR; i++) {
                uint r = min(row0 + i, p.N - 1u); // a past-the-end row re-reads the last (never written)
                acc[i] += q6kChunkDot(r * rowBytes + b * BLOCK_BYTES, h, hh, xw, xsc);
            }
        }
#else
        for (uint u = uFirst; u < units; u += uStep) {
            uint xi = (u >> 5) * 64u + (u & 31u);
            uvec4 xa = xq4[xi], xb = xq4[xi + 32u];
            vec2 s = xs[u];
            [[unroll]] for (uint i = 0u; i < NR; i++) {
                uint r = min(row0 + i, p.N - 1u); // a past-the-end row re-reads the last (never written)
                acc[i] += unitDot(r * rowBytes, nb, u, xa, xb, s);
            }
        }
#endif
        finishRows(acc, row0, r0, share);
    }
}
