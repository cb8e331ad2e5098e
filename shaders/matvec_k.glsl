// matvec_k.glsl: the decode product (one token) for K-quant weights: y[r] (+)= W[r]·x for
// rows r < N. A 256-element superblock is read as 16 slots of 16 consecutive elements; slot s
// of every superblock goes to lane s % lanes of the row's `lanes` threads, so the lanes of a
// row read one superblock's bytes side by side and x as 16-byte loads of neighbouring
// elements (a lane walking whole 32-element units of its own reads x 128 bytes apart from its
// neighbours, and that spread of loads, not memory bandwidth, bounded the old kernel). Push
// constants and dispatch are matmul.glsl's (64/lanes rows per workgroup). TN_TOKENS 1 is the
// decode matvec; TN_TOKENS 8 serves short prompts (2-8 tokens), decoding each weight slot
// once for all of them, where a 64-token GEMM tile would be mostly padding.
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K; uint N; uint M; uint xStride; uint yStride; uint rowsPerX; uint accumulate; uint lanes;
} p;

#include "dequant.glsl"

#ifndef TN_TOKENS
#define TN_TOKENS 1u
#endif
const uint TN = TN_TOKENS; // tokens per workgroup (z groups take the next TN)
shared float red[TN][64];

// slotWeights decodes slot s (elements 16s..16s+15) of the superblock at byte base: the slot's
// value of element i is a·q[i] - mn.
void slotWeights(uint base, uint s, out vec4 q[4], out float a, out float mn) {
    uint u = s >> 1, hf = s & 1u; // 32-element sub-block u, its half hf
#if defined(T_Q4_K) || defined(T_Q5_K)
    vec2 dm = unpackHalf2x16(w[base >> 2]);
    float sc, m;
    scaleMinK4(base + 4u, u, sc, m);
    a = dm.x * sc;
    mn = dm.y * m;
    uint shift = (u & 1u) * 4u;
#if defined(T_Q4_K)
    uint ql = (base + 16u + 32u * (u >> 1) + 16u * hf) >> 2;
#else
    uint ql = (base + 48u + 32u * (u >> 1) + 16u * hf) >> 2;
    uint qh = (base + 16u + 16u * hf) >> 2;
#endif
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = (w[ql + i] >> shift) & 0x0f0f0f0fu;
#if defined(T_Q5_K)
        q4 |= ((w[qh + i] >> u) & 0x01010101u) << 4;
#endif
        q[i] = vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24);
    }
#elif defined(T_Q6_K)
    uint h = u >> 2, k = u & 3u;
    uint ql = base + 64u * h + (k & 1u) * 32u + 16u * hf;
    uint qh = base + 128u + 32u * h + 16u * hf;
    a = f16at(base + 208u) * float(s8(base + 192u + 8u * h + 2u * k + hf));
    mn = 0.0;
    uint shl = (k >> 1) * 4u, shh = 2u * k;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = ((load4(ql + 4u * i) >> shl) & 0x0f0f0f0fu) | (((load4(qh + 4u * i) >> shh) & 0x03030303u) << 4);
        q[i] = vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24) - 32.0;
    }
#else
#error "matvec_k.glsl: define T_Q4_K, T_Q5_K or T_Q6_K"
#endif
}

// slotDot is the decoded slot times x from element xo (a multiple of 4).
float slotDot(vec4 q[4], float a, float mn, uint xo) {
    float sq = 0.0, sx = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        vec4 xv = x4[(xo >> 2) + i];
        sq += dot(q[i], xv);
#if !defined(T_Q6_K)
        sx += (xv.x + xv.y) + (xv.z + xv.w);
#endif
    }
    return a * sq - mn * sx;
}

void main() {
    uint LANES = p.lanes, ROWS = 64u / p.lanes;
    uint tid = gl_LocalInvocationID.x;
    uint lane = tid % LANES;
    uint r = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * ROWS + tid / LANES;
    uint t0 = gl_WorkGroupID.z * TN;
    uint nt = min(TN, p.M - t0);
    float acc[TN];
    [[unroll]] for (uint t = 0u; t < TN; t++) acc[t] = 0.0;
    if (r < p.N) {
        uint nb = p.K / 256u;
        uint rowBase = r * nb * BLOCK_BYTES;
        for (uint b = 0u; b < nb; b++) {
            for (uint s = lane; s < 16u; s += LANES) {
                vec4 q[4];
                float a, mn;
                slotWeights(rowBase + b * BLOCK_BYTES, s, q, a, mn);
                [[unroll]] for (uint t = 0u; t < TN; t++) {
                    if (t < nt) acc[t] += slotDot(q, a, mn, (t0 + t) * p.xStride + b * 256u + 16u * s);
                }
            }
        }
    }
    [[unroll]] for (uint t = 0u; t < TN; t++) red[t][tid] = acc[t];
    barrier();
    if (lane == 0u && r < p.N) {
        for (uint t = 0u; t < nt; t++) {
            float sum = 0.0;
            for (uint l = 0u; l < LANES; l++) sum += red[t][tid + l];
            uint o = (t0 + t) * p.yStride + r;
            y[o] = p.accumulate != 0u ? y[o] + sum : sum;
        }
    }
}
