// matvec_dec.glsl: the fast tier's fused decode product, y[r] (+)= W[r]·round(norm(x)) for one
// token, on int8 dot products. One dispatch does what three stages did (an RMSNorm, the
// activation rounding pass and the product) and, paired, a fourth (SwiGLU):
//   1. prologue, per workgroup: x (K floats) is normalized when flags has F_NORM
//      (x·scale·g with scale = 1/sqrt(mean(x²)+eps), as rmsnorm_fast computes it), then
//      rounded to the int8 blocks llama.cpp's quantized products see — Q8_0 32-blocks for
//      Q4_0/Q8_0 weights (d = f16(amax/127), q = roundEven(x·127/amax), as matvec_fast rounds),
//      Q8_K 256-blocks for the K-quants (the signed element of largest magnitude, the first on
//      ties, iscale = -127/max, q = min(127, roundEven(iscale·x)), as quantact rounds) — into
//      shared memory: K bytes of q and one scale a block. Every workgroup repeats it (x is
//      16-56 KB of L2 against megabytes of weights), so no barrier between dispatches is needed;
//   2. each subgroup takes NR rows a pass (or, on grids of few workgroups, the workgroup's
//      subgroups split K of NR rows and add in shared memory), its lanes striding over the
//      row's 32-element units: one unit's weights times the unit's q with dotPacked4x8EXT is an
//      exact integer sum, scaled once (matvec_dec_unit.glsl);
//   3. with F_PAIR the same rows of a second weight (binding 4) are taken too and the output is
//      silu(W·x)·(W2·x), rounded as swiglu.comp rounds it (gate and up in one dispatch).
// Numerics: integer sums are exact; each unit adds d_x·d_w·sum in f32 in lane order, then a
// subgroup sum: within a stated bound of an f64 reference on the same rounded x (fast_test.go).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(std430, binding = 3) readonly buffer Gb { vec4 g4[]; };  // the norm's weight (F_NORM)
layout(std430, binding = 4) readonly buffer W2b { uint w2[]; }; // the paired weight (F_PAIR)
layout(push_constant) uniform P {
    uint K;          // row length (elements), a multiple of the block, at most MAXK
    uint N;          // rows
    uint rowsPerWG;  // rows per workgroup
    uint rowsPerX;   // workgroups per grid line (gl_NumWorkGroups.x)
    uint accumulate; // 1: y += W·x (not with F_PAIR)
    uint shareRows;  // 1: the workgroup's subgroups split K of the same NR rows (rowsPerWG = NR)
    uint flags;      // F_NORM | F_PAIR
    float eps;       // the norm's epsilon
} p;
const uint F_NORM = 1u, F_PAIR = 2u;

#include "exact.glsl" // roundHalf, divExact, expExact

// idot: the signed int8 dot product of two packed words, exact.
int idot(uint a, uint b) { return dotPacked4x8EXT(int(a), int(b)); }

#if !(defined(T_Q4_0) || defined(T_Q8_0) || defined(T_Q2_K) || defined(T_Q3_K) || defined(T_Q4_K) || defined(T_Q5_K) || defined(T_Q6_K))
#error "matvec_dec.glsl: define T_Q4_0, T_Q8_0, T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K or T_Q6_K"
#endif
#include "dequant_blocks.glsl" // BLOCK_ELEMS, BLOCK_BYTES
#if defined(T_Q4_0) || defined(T_Q8_0)
const uint QBLOCK = 32u; // activations in Q8_0 blocks
#else
const uint QBLOCK = 256u; // activations in Q8_K blocks
#endif

#ifndef NR_ROWS
#define NR_ROWS 4u
#endif
const uint NR = NR_ROWS; // rows per subgroup pass

const uint MAXK = 16384u; // the longest row (fast.go's decodeFusedMaxK)
shared uint xqs[MAXK / 4u];    // the rounded activations, four int8 to a word
shared float xd[MAXK / 32u];   // their block scales
shared float chunkAbs[128];    // per 32-element chunk: its largest magnitude
shared float chunkVal[128];    //   and that element's signed value (the first on ties)
shared float ssPart[16];       // the norm's per-subgroup sums (16 subgroups at most)
shared float sgPart[16u * 2u * NR]; // share mode: per subgroup, NR sums (twice with F_PAIR)

#define WB w
#define UNIT_DOT unitDotA
#define WORDS8_ words8A
#define B8_ b8A
#define U16_ u16A
#include "matvec_dec_unit.glsl"
#undef WB
#undef UNIT_DOT
#undef WORDS8_
#undef B8_
#undef U16_
#define WB w2
#define UNIT_DOT unitDotB
#define WORDS8_ words8B
#define B8_ b8B
#define U16_ u16B
#include "matvec_dec_unit.glsl"

uint packQ(ivec4 q) { return uint(q.x & 0xff) | (uint(q.y & 0xff) << 8) | (uint(q.z & 0xff) << 16) | (uint(q.w & 0xff) << 24); }

// prepareActivations fills xqs and xd (every thread of the workgroup calls it).
void prepareActivations() {
    uint tid = gl_LocalInvocationID.x;
    bool norm = (p.flags & F_NORM) != 0u;
    float scale = 1.0;
    if (norm) {
        float ss = 0.0;
        for (uint i = tid; i < p.K / 4u; i += 128u) {
            vec4 v = x4[i];
            ss += dot(v, v);
        }
        ss = subgroupAdd(ss);
        if (subgroupElect()) ssPart[gl_SubgroupID] = ss;
        barrier();
        float tot = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) tot += ssPart[i];
        scale = inversesqrt(tot / float(p.K) + p.eps);
    }
    uint chunks = p.K / 32u;
    for (uint c0 = 0u; c0 < chunks; c0 += 128u) { // uniform: every thread meets every barrier
        uint c = c0 + tid;
        bool live = c < chunks;
        vec4 v[8];
        float amax = 0.0, sv = 0.0;
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            v[i] = live ? x4[8u * c + i] : vec4(0.0);
            if (norm && live) v[i] = v[i] * scale * g4[8u * c + i];
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                float a = abs(v[i][e]);
                if (a > amax) { // strictly: a tie keeps the first
                    amax = a;
                    sv = v[i][e];
                }
            }
        }
#if defined(T_Q4_0) || defined(T_Q8_0)
        if (live) {
            float inv = amax > 0.0 ? 127.0 / amax : 0.0;
            xd[c] = roundHalf(amax / 127.0);
            [[unroll]] for (uint i = 0u; i < 8u; i++) xqs[8u * c + i] = packQ(ivec4(roundEven(v[i] * inv)));
        }
#else
        chunkAbs[tid] = amax;
        chunkVal[tid] = sv;
        barrier();
        uint first = tid & ~7u; // the 8 chunks of this thread's 256-block
        float bm = 0.0, bv = 0.0;
        for (uint k = first; k < first + 8u; k++) {
            if (chunkAbs[k] > bm) {
                bm = chunkAbs[k];
                bv = chunkVal[k];
            }
        }
        if (live) {
            float iscale = bm > 0.0 ? divExact(-127.0, bv) : 0.0;
            if ((c & 7u) == 0u) xd[c >> 3] = bm > 0.0 ? divExact(1.0, iscale) : 0.0;
            [[unroll]] for (uint i = 0u; i < 8u; i++) xqs[8u * c + i] = packQ(min(ivec4(127), ivec4(roundEven(v[i] * iscale))));
        }
        barrier(); // chunkAbs is rewritten by the next round
#endif
    }
    barrier();
}

float silu(float a) { // as swiglu.comp rounds it
    precise float e = 1.0 + expExact(-a);
    return divExact(a, e);
}

void main() {
    prepareActivations();
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX;
    uint units = p.K / 32u;
    uint rowBytes = (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
    bool share = p.shareRows != 0u, pair = (p.flags & F_PAIR) != 0u;
    uint rFirst = share ? 0u : gl_SubgroupID * NR, rStep = share ? NR : gl_NumSubgroups * NR;
    uint uFirst = share ? gl_SubgroupID * lanes + lane : lane, uStep = share ? gl_NumSubgroups * lanes : lanes;
    for (uint r0 = rFirst; r0 < p.rowsPerWG; r0 += rStep) {
        uint row0 = wg * p.rowsPerWG + r0;
        if (row0 >= p.N) break;
        float acc[NR], acc2[NR];
        [[unroll]] for (uint i = 0u; i < NR; i++) {
            acc[i] = 0.0;
            acc2[i] = 0.0;
        }
        for (uint u = uFirst; u < units; u += uStep) {
            uint xq[8];
            [[unroll]] for (uint i = 0u; i < 8u; i++) xq[i] = xqs[8u * u + i];
            int sx[2];
            sx[0] = idot(xq[0], 0x01010101u) + idot(xq[1], 0x01010101u) + idot(xq[2], 0x01010101u) + idot(xq[3], 0x01010101u);
            sx[1] = idot(xq[4], 0x01010101u) + idot(xq[5], 0x01010101u) + idot(xq[6], 0x01010101u) + idot(xq[7], 0x01010101u);
            float dx = xd[(u * 32u) / QBLOCK];
            [[unroll]] for (uint i = 0u; i < NR; i++) {
                uint r = min(row0 + i, p.N - 1u); // a past-the-end row re-reads the last (never written)
                acc[i] += dx * unitDotA(r * rowBytes, u, xq, sx);
            }
            if (pair) {
                [[unroll]] for (uint i = 0u; i < NR; i++) {
                    uint r = min(row0 + i, p.N - 1u);
                    acc2[i] += dx * unitDotB(r * rowBytes, u, xq, sx);
                }
            }
        }
        if (share) { // uniform across the workgroup
            [[unroll]] for (uint i = 0u; i < NR; i++) {
                float sum = subgroupAdd(acc[i]);
                float sum2 = pair ? subgroupAdd(acc2[i]) : 0.0;
                if (subgroupElect()) {
                    sgPart[gl_SubgroupID * 2u * NR + i] = sum;
                    sgPart[gl_SubgroupID * 2u * NR + NR + i] = sum2;
                }
            }
            barrier();
            if (gl_LocalInvocationID.x < NR) {
                uint i = gl_LocalInvocationID.x, r = row0 + i;
                float sum = 0.0, sum2 = 0.0;
                for (uint g = 0u; g < gl_NumSubgroups; g++) {
                    sum += sgPart[g * 2u * NR + i];
                    sum2 += sgPart[g * 2u * NR + NR + i];
                }
                if (r < p.N) {
                    if (pair) {
                        precise float v = silu(sum) * sum2;
                        y[r] = v;
                    } else {
                        y[r] = p.accumulate != 0u ? y[r] + sum : sum;
                    }
                }
            }
            barrier();
            continue;
        }
        [[unroll]] for (uint i = 0u; i < NR; i++) {
            float sum = subgroupAdd(acc[i]);
            float sum2 = pair ? subgroupAdd(acc2[i]) : 0.0;
            uint r = row0 + i;
            if (subgroupElect() && r < p.N && r0 + i < p.rowsPerWG) {
                if (pair) {
                    precise float v = silu(sum) * sum2;
                    y[r] = v;
                } else {
                    y[r] = p.accumulate != 0u ? y[r] + sum : sum;
                }
            }
        }
    }
}
