// moe_down_x8.glsl: a decode step's expert down products and their combine in one dispatch
// (moe_matvec_x8.glsl's down product, then moe_combine.comp's weighted sum). For the token's
// USED pairs j (expert e_j = ids[j], weight wts[j], hidden row h_j rounded by quantize_x8):
//   X[r] += Σ_j wts[j] · (W_{e_j}[r] · h_j)   (+ sigmoid(g) · S[r] with a shared expert)
// A subgroup takes NR rows; its lanes stride over a row's USED·units (pair, 32-element unit)
// products, each scaled by its pair's weight, and one subgroup sum ends each row: no lane idles
// on the short rows of an expert's down product (768 elements: 24 units), and no pass writes
// the pairs' outputs for another to read. The sums are f32 in an order of their own (the fast
// tier's; moe_combine keeps the CPU's order). W binds the whole 3-D expert tensor.
// With ROUND_IN (moe_down_x8_<type>_ri.comp) binding 1 holds the pairs' hidden rows as f32 and
// each workgroup rounds them itself into shared memory first, as quantize_x8 rounds them (the
// same int8 values, scales and sums bit for bit: Q8_K's 256-blocks, or for Q4_0 and Q8_0 the
// 32-blocks), so the decode step has no rounding stage of its own between the experts' gate
// and up and this dispatch. The host keeps used·K within RI_MAX_V4 vec4s.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 0) readonly buffer W4b { uvec4 w4[]; };
#ifdef ROUND_IN
layout(std430, binding = 1) readonly buffer Hidb { vec4 h4[]; }; // the pairs' hidden rows, K floats each
#else
layout(std430, binding = 1) readonly buffer Xb { uvec4 xq4[]; };
layout(std430, binding = 2) readonly buffer Sb { vec2 xs[]; };
#endif
layout(std430, binding = 3) buffer Yb { float y[]; };          // the residual, added to
layout(std430, binding = 4) readonly buffer Ib { uint ids[]; };
layout(std430, binding = 5) readonly buffer Gw { float wts[]; };
layout(std430, binding = 6) readonly buffer Hb { float sh[]; }; // the shared expert's output
layout(std430, binding = 7) readonly buffer Lb { float g[]; };  // its gate logit
layout(push_constant) uniform P {
    uint K;         // row length (elements, a multiple of 32 and of the block)
    uint N;         // rows of one expert
    uint used;      // pairs of the token
    uint rowsPerX;  // row groups per grid line (gl_NumWorkGroups.x)
    uint hasShared; // 1: add sigmoid(g[0])·sh
} p;

const uint NR = 2u;

#include "x8_unit.glsl"
#include "exact.glsl" // expExact, divExact: moe_combine's sigmoid (and the rounding's)

#ifdef ROUND_IN
#include "x8_round.glsl"
const uint RI_MAX_V4 = 1536u;             // used·K/4 at most (Qwen3-30B-A3B: 8 pairs of 768)
const uint RI_PER = RI_MAX_V4 / 128u;     // vec4s a thread (local_size_x)
#if defined(T_Q4_0) || defined(T_Q8_0)
const uint RI_EPB = 8u;                   // vec4s a rounding block: quantize_x8's 32-blocks
#define RI_Q8K 0
#else
const uint RI_EPB = 64u;                  // Q8_K's 256-blocks (the K-quants and i-quants)
#define RI_Q8K 1
#endif
shared float riMag[RI_MAX_V4];            // each vec4's largest magnitude, then its Σq
shared float riVal[RI_MAX_V4];            // that element's signed value
shared uvec4 riQ[RI_MAX_V4 / 4u];         // unit g's int8 halves at 2g and 2g+1
shared vec2 riS[RI_MAX_V4 / 8u];          // unit g's (d, Σq)

// roundIn rounds the used·K hidden floats into riQ and riS; unit g = pair·(K/32) + u. Every
// thread calls it. The block maxima go through a tree of adjacent pairs (the left one kept on
// equal magnitudes), so each block's first largest magnitude in element order sets its sign,
// as quantize_x8's in-order scan does.
void roundIn() {
    uint tid = gl_LocalInvocationIndex;
    uint n4 = p.used * p.K / 4u;
    vec4 v[RI_PER];
    [[unroll]] for (uint k = 0u; k < RI_PER; k++) {
        uint i = tid + 128u * k;
        v[k] = i < n4 ? h4[i] : vec4(0.0);
    }
    [[unroll]] for (uint k = 0u; k < RI_PER; k++) {
        uint i = tid + 128u * k;
        if (i < n4) {
            float val;
            riMag[i] = x8FirstMax(v[k], val);
            riVal[i] = val;
        }
    }
    barrier();
    uint nBlk = n4 / RI_EPB;
    for (uint st = 1u; st < RI_EPB; st <<= 1) {
        uint per = RI_EPB / (2u * st);
        for (uint e = tid; e < nBlk * per; e += 128u) {
            uint b = e / per;
            uint a = b * RI_EPB + (e - b * per) * 2u * st, c = a + st;
            if (riMag[c] > riMag[a]) {
                riMag[a] = riMag[c];
                riVal[a] = riVal[c];
            }
        }
        barrier();
    }
    float bm[RI_PER], bv[RI_PER];
    [[unroll]] for (uint k = 0u; k < RI_PER; k++) {
        uint b0 = ((tid + 128u * k) / RI_EPB) * RI_EPB;
        bm[k] = b0 < n4 ? riMag[b0] : 0.0;
        bv[k] = b0 < n4 ? riVal[b0] : 0.0;
    }
    barrier(); // every thread has its blocks' maxima: riMag takes the sums
    [[unroll]] for (uint k = 0u; k < RI_PER; k++) {
        uint i = tid + 128u * k;
        if (i < n4) {
            float d;
#if RI_Q8K
            ivec4 q = x8RoundQ8K(v[k], bm[k], bv[k], d);
#else
            ivec4 q = x8Round32(v[k], bm[k], d);
#endif
            uint g = i / 8u, j = i % 8u;
            riQ[2u * g + j / 4u][j % 4u] = x8Word(q);
            riMag[i] = float((q.x + q.y) + (q.z + q.w));
            if (j == 0u) riS[g].x = d;
        }
    }
    barrier();
    for (uint g = tid; g < n4 / 8u; g += 128u) {
        float sum = 0.0;
        [[unroll]] for (uint jj = 0u; jj < 8u; jj++) sum += riMag[8u * g + jj];
        riS[g].y = sum;
    }
    barrier();
}
#endif

// downRows adds rows row0.. of the combined down products to the residual.
void downRows(uint row0) {
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    uint units = p.K / 32u, nb = units / UNITS_PER_BLOCK;
    uint rowBytes = nb * BLOCK_BYTES;
    uint xWords = ((units + 31u) / 32u) * 64u; // one rounded row: x8QuantBytes(K)/16 words
    float acc[NR];
    [[unroll]] for (uint i = 0u; i < NR; i++) acc[i] = 0.0;
    uint total = p.used * units;
    for (uint t = lane; t < total; t += lanes) {
        uint j = t / units, u = t - j * units;
        uint base = ids[j] * p.N * rowBytes;
        float wj = wts[j];
#ifdef ROUND_IN
        uint gu = j * units + u;
        uvec4 xa = riQ[2u * gu], xb = riQ[2u * gu + 1u];
        vec2 s = riS[gu];
#else
        uint xi = j * xWords + (u >> 5) * 64u + (u & 31u);
        uvec4 xa = xq4[xi], xb = xq4[xi + 32u];
        vec2 s = xs[j * units + u];
#endif
        [[unroll]] for (uint i = 0u; i < NR; i++) {
            uint rb = base + min(row0 + i, p.N - 1u) * rowBytes; // a row past the end re-reads the last (never written)
            acc[i] += wj * unitDot(rb, nb, u, xa, xb, s);
        }
    }
    float sg = 0.0;
    if (p.hasShared != 0u) {
        precise float den = 1.0 + expExact(-g[0]);
        sg = divExact(1.0, den);
    }
    [[unroll]] for (uint i = 0u; i < NR; i++) {
        float v = subgroupAdd(acc[i]);
        uint r = row0 + i;
        if (subgroupElect() && r < p.N) {
            if (p.hasShared != 0u) v += sh[r] * sg;
            y[r] = y[r] + v;
        }
    }
}

void main() {
#if defined(T_IQUANT)
    x8TablesLoad();
    barrier();
#endif
    uint wgRow0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * NR * gl_NumSubgroups;
    if (wgRow0 >= p.N) return; // uniform over the workgroup
#ifdef ROUND_IN
    roundIn();
#endif
    uint row0 = wgRow0 + gl_SubgroupID * NR;
    if (row0 >= p.N) return; // uniform over the subgroup (no barriers follow)
    downRows(row0);
}
