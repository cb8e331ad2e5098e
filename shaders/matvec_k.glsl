// matvec_k.glsl: the decode product (one token) for K-quant weights: y[r] (+)= W[r]·x for
// rows r < N. A 256-element superblock is read as 16 slots of 16 consecutive elements; slot s
// of every superblock goes to lane s % lanes of the row's `lanes` threads, so the lanes of a
// row read one superblock's bytes side by side and x as 16-byte loads of neighbouring
// elements (a lane walking whole 32-element units of its own reads x 128 bytes apart from its
// neighbours, and that spread of loads, not memory bandwidth, bounded the old kernel). Push
// constants and dispatch are matmul.glsl's (M = 1; 64/lanes rows per workgroup).
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K; uint N; uint M; uint xStride; uint yStride; uint rowsPerX; uint accumulate; uint lanes;
} p;

#include "dequant.glsl"

shared float red[64];

// slotDot returns slot s (elements 16s..16s+15) of the superblock at byte base times x from
// element xo (a multiple of 4).
float slotDot(uint base, uint s, uint xo) {
    uint u = s >> 1, hf = s & 1u; // 32-element sub-block u, its half hf
    float sq = 0.0, sx = 0.0;
#if defined(T_Q4_K) || defined(T_Q5_K)
    vec2 dm = unpackHalf2x16(w[base >> 2]);
    float sc, m;
    scaleMinK4(base + 4u, u, sc, m);
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
        vec4 q = vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24);
        vec4 xv = x4[(xo >> 2) + i];
        sq += dot(q, xv);
        sx += (xv.x + xv.y) + (xv.z + xv.w);
    }
    return dm.x * sc * sq - dm.y * m * sx;
#elif defined(T_Q6_K)
    uint h = u >> 2, k = u & 3u;
    uint ql = base + 64u * h + (k & 1u) * 32u + 16u * hf;
    uint qh = base + 128u + 32u * h + 16u * hf;
    float dsc = f16at(base + 208u) * float(s8(base + 192u + 8u * h + 2u * k + hf));
    uint shl = (k >> 1) * 4u, shh = 2u * k;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = ((load4(ql + 4u * i) >> shl) & 0x0f0f0f0fu) | (((load4(qh + 4u * i) >> shh) & 0x03030303u) << 4);
        vec4 q = vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24) - 32.0;
        sq += dot(q, x4[(xo >> 2) + i]);
    }
    return dsc * sq;
#elif defined(T_Q2_K)
    // slot s is scale byte s's 16 elements: quarter k of half h, bytes 16·hf on of its quants
    uint h = u >> 2, k = u & 3u;
    uint qs = base + 16u + 32u * h + 16u * hf, sh = 2u * k;
    vec2 dm = unpackHalf2x16(load4(base + 80u));
    uint sc = b8(base + s);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = (load4(qs + 4u * i) >> sh) & 0x03030303u;
        vec4 q = vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24);
        vec4 xv = x4[(xo >> 2) + i];
        sq += dot(q, xv);
        sx += (xv.x + xv.y) + (xv.z + xv.w);
    }
    return dm.x * float(sc & 0xfu) * sq - dm.y * float(sc >> 4) * sx;
#elif defined(T_Q3_K)
    // slot s is scale s's 16 elements: quarter k of half h, bytes 16·hf on of its quants and
    // of the high bits
    uint h = u >> 2, k = u & 3u;
    uint qs = base + 32u + 32u * h + 16u * hf, hm = base + 16u * hf;
    float dsc = f16at(base + 108u) * float(q3Scale(base + 96u, s));
    uint shq = 2u * k, shh = 4u * h + k;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = ((load4(qs + 4u * i) >> shq) & 0x03030303u) | (((load4(hm + 4u * i) >> shh) & 0x01010101u) << 2);
        vec4 q = vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24) - 4.0;
        sq += dot(q, x4[(xo >> 2) + i]);
    }
    return dsc * sq;
#else
#error "matvec_k.glsl: define T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K or T_Q6_K"
#endif
}

void main() {
    uint LANES = p.lanes, ROWS = 64u / p.lanes;
    uint tid = gl_LocalInvocationID.x;
    uint lane = tid % LANES;
    uint r = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * ROWS + tid / LANES;
    float acc = 0.0;
    if (r < p.N) {
        uint nb = p.K / 256u;
        uint rowBase = r * nb * BLOCK_BYTES;
        for (uint b = 0u; b < nb; b++) {
            for (uint s = lane; s < 16u; s += LANES) acc += slotDot(rowBase + b * BLOCK_BYTES, s, b * 256u + 16u * s);
        }
    }
    red[tid] = acc;
    barrier();
    if (lane == 0u && r < p.N) {
        float sum = 0.0;
        for (uint l = 0u; l < LANES; l++) sum += red[tid + l];
        y[r] = p.accumulate != 0u ? y[r] + sum : sum;
    }
}
