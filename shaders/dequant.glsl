// dequant.glsl: reads GGUF/GGML quantized blocks from a uint-word storage buffer `w` and
// expands one 32-element unit of a block into floats. The including shader defines exactly
// one of T_F32 T_F16 T_BF16 T_Q4_0 T_Q4_1 T_Q5_0 T_Q5_1 T_Q8_0 T_Q2_K T_Q3_K T_Q4_K T_Q5_K T_Q6_K, the i-quants
// T_IQ4_NL T_IQ4_XS T_IQ2_XXS T_IQ2_XS T_IQ2_S T_IQ3_XXS T_IQ3_S T_IQ1_S T_IQ1_M, or T_MXFP4,
// and declares `w` (uint words). Offsets are in bytes; every block of these types starts
// 2-byte aligned except MXFP4's 17-byte blocks, which dq32 reads byte by byte.

uint b8(uint off) { return (w[off >> 2] >> ((off & 3u) << 3)) & 0xffu; }
uint u16(uint off) { return (w[off >> 2] >> ((off & 2u) << 3)) & 0xffffu; }
uint u32at(uint off) { return u16(off) | (u16(off + 2u) << 16); }
float f16at(uint off) { return unpackHalf2x16(u16(off)).x; }
// load4: the 4 bytes at a 2-byte aligned offset (one word load when 4-aligned).
uint load4(uint off) {
    uint i = off >> 2;
    return (off & 2u) == 0u ? w[i] : (w[i] >> 16) | (w[i + 1u] << 16);
}
int s8(uint off) { return int(b8(off) << 24) >> 24; }

#include "dequant_blocks.glsl"

#if defined(T_Q4_K) || defined(T_Q5_K)
// The 6-bit scale and min of sub-block j (0..7) from the 12 packed scale bytes at s.
void scaleMinK4(uint s, uint j, out float sc, out float m) {
    if (j < 4u) {
        sc = float(b8(s + j) & 63u);
        m = float(b8(s + j + 4u) & 63u);
    } else {
        sc = float((b8(s + j + 4u) & 0xfu) | ((b8(s + j - 4u) >> 6) << 4));
        m = float((b8(s + j + 4u) >> 4) | ((b8(s + j) >> 6) << 4));
    }
}
#endif

#if defined(T_Q3_K)
// Q3_K's superblock: 32 bytes of high bits (element e's in byte e%32, bit e/32), 64 bytes of
// 2-bit quants (element e's in byte 32·(e/128) + e%32, bits 2·((e%128)/32)), 12 bytes packing
// 16 six-bit scales, f16 d at 108; element e is d·(scale(e/16) - 32)·(q + 4·high - 4).
// q3Scale is scale j (0..15) of the 12 bytes at s, the 32 taken off: its low four bits are a
// nibble of byte j%8 (the high nibble from j = 8 on), its top two bits are in byte 8 + j%4 at
// bit 2·(j/4).
int q3Scale(uint s, uint j) {
    uint lo = (b8(s + (j & 7u)) >> (4u * (j >> 3))) & 0xfu;
    uint hi = (b8(s + 8u + (j & 3u)) >> (2u * (j >> 2))) & 3u;
    return int(lo | (hi << 4)) - 32;
}
#endif

#include "dequant_iq.glsl"

// dq32 expands unit u (32 elements) of the block at byte offset base into v. Quantized bytes
// are fetched four at a time.
void dq32(uint base, uint u, out float v[32]) {
#if defined(T_F32)
    [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = uintBitsToFloat(w[(base >> 2) + i]);
#elif defined(T_F16)
    [[unroll]] for (uint i = 0u; i < 16u; i++) {
        vec2 h = unpackHalf2x16(w[(base >> 2) + i]);
        v[2u * i] = h.x; v[2u * i + 1u] = h.y;
    }
#elif defined(T_BF16)
    [[unroll]] for (uint i = 0u; i < 16u; i++) { // a bfloat16 is the top half of an f32
        uint h = w[(base >> 2) + i];
        v[2u * i] = uintBitsToFloat(h << 16); v[2u * i + 1u] = uintBitsToFloat(h & 0xffff0000u);
    }
#elif defined(T_Q4_0)
    float d = f16at(base);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = load4(base + 2u + 4u * i);
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            uint q = (q4 >> (8u * b)) & 0xffu;
            v[4u * i + b] = (float(q & 0xfu) - 8.0) * d;
            v[4u * i + b + 16u] = (float(q >> 4) - 8.0) * d;
        }
    }
#elif defined(T_Q4_1)
    float d = f16at(base), m = f16at(base + 2u);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = w[(base >> 2) + 1u + i];
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            uint q = (q4 >> (8u * b)) & 0xffu;
            v[4u * i + b] = float(q & 0xfu) * d + m;
            v[4u * i + b + 16u] = float(q >> 4) * d + m;
        }
    }
#elif defined(T_Q5_0)
    float d = f16at(base);
    uint qh = load4(base + 2u);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = load4(base + 6u + 4u * i);
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            uint j = 4u * i + b;
            uint q = (q4 >> (8u * b)) & 0xffu;
            v[j] = (float((q & 0xfu) | (((qh >> j) & 1u) << 4)) - 16.0) * d;
            v[j + 16u] = (float((q >> 4) | (((qh >> (j + 16u)) & 1u) << 4)) - 16.0) * d;
        }
    }
#elif defined(T_Q5_1)
    float d = f16at(base), m = f16at(base + 2u);
    uint qh = w[(base >> 2) + 1u];
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = w[(base >> 2) + 2u + i];
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            uint j = 4u * i + b;
            uint q = (q4 >> (8u * b)) & 0xffu;
            v[j] = float((q & 0xfu) | (((qh >> j) & 1u) << 4)) * d + m;
            v[j + 16u] = float((q >> 4) | (((qh >> (j + 16u)) & 1u) << 4)) * d + m;
        }
    }
#elif defined(T_Q8_0)
    float d = f16at(base);
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q4 = load4(base + 2u + 4u * i);
        [[unroll]] for (uint b = 0u; b < 4u; b++) v[4u * i + b] = float(int(q4 << (24u - 8u * b)) >> 24) * d;
    }
#elif defined(T_Q2_K)
    // Q2_K's superblock: 16 scale bytes (low nibble the scale, high nibble the min of the 16
    // elements 16j..16j+15), 64 bytes of 2-bit quants (element e's in byte 16 + 32·(e/128) +
    // e%32, bits 2·((e%128)/32)), f16 d at 80, f16 dmin at 82; element e is
    // d·scale·q − dmin·min. Unit u: quarter k of half h, scales 2u and 2u + 1.
    vec2 dm = unpackHalf2x16(load4(base + 80u));
    uint h = u >> 2, k = u & 3u;
    uint sc0 = b8(base + 2u * u), sc1 = b8(base + 2u * u + 1u);
    float a0 = dm.x * float(sc0 & 0xfu), m0 = dm.y * float(sc0 >> 4);
    float a1 = dm.x * float(sc1 & 0xfu), m1 = dm.y * float(sc1 >> 4);
    uint qs = base + 16u + 32u * h, sh = 2u * k;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q4 = (load4(qs + 4u * i) >> sh) & 0x03030303u;
        [[unroll]] for (uint b = 0u; b < 4u; b++) v[4u * i + b] = (i < 4u ? a0 : a1) * float((q4 >> (8u * b)) & 0xffu) - (i < 4u ? m0 : m1);
    }
#elif defined(T_Q3_K)
    // unit u: quarter k of half h (shift 2k, high bit 4h + k), scales 2u and 2u + 1
    float d = f16at(base + 108u);
    uint h = u >> 2, k = u & 3u;
    float d0 = d * float(q3Scale(base + 96u, 2u * u)), d1 = d * float(q3Scale(base + 96u, 2u * u + 1u));
    uint qs = base + 32u + 32u * h;
    uint shq = 2u * k, shh = 4u * h + k;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q4 = ((load4(qs + 4u * i) >> shq) & 0x03030303u) | (((load4(base + 4u * i) >> shh) & 0x01010101u) << 2);
        [[unroll]] for (uint b = 0u; b < 4u; b++) v[4u * i + b] = (i < 4u ? d0 : d1) * float(int((q4 >> (8u * b)) & 0xffu) - 4);
    }
#elif defined(T_Q4_K)
    vec2 dm = unpackHalf2x16(w[base >> 2]);
    float sc, m;
    scaleMinK4(base + 4u, u, sc, m);
    float a = dm.x * sc, bb = dm.y * m;
    uint q = (base + 16u + 32u * (u >> 1)) >> 2;
    uint shift = (u & 1u) * 4u;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q4 = w[q + i] >> shift;
        [[unroll]] for (uint b = 0u; b < 4u; b++) v[4u * i + b] = a * float((q4 >> (8u * b)) & 0xfu) - bb;
    }
#elif defined(T_Q5_K)
    vec2 dm = unpackHalf2x16(w[base >> 2]);
    float sc, m;
    scaleMinK4(base + 4u, u, sc, m);
    float a = dm.x * sc, bb = dm.y * m;
    uint qh = (base + 16u) >> 2;
    uint ql = (base + 48u + 32u * (u >> 1)) >> 2;
    uint shift = (u & 1u) * 4u;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint l4 = w[ql + i] >> shift;
        uint h4 = w[qh + i] >> u;
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            uint q = ((l4 >> (8u * b)) & 0xfu) | (((h4 >> (8u * b)) & 1u) << 4);
            v[4u * i + b] = a * float(q) - bb;
        }
    }
#elif defined(T_Q6_K)
    float d = f16at(base + 208u);
    uint h = u >> 2, k = u & 3u;
    uint ql = base + 64u * h + (k & 1u) * 32u;
    uint qh = base + 128u + 32u * h;
    uint sc = base + 192u + 8u * h + 2u * k;
    uint shift = (k >> 1) * 4u;
    float d0 = d * float(s8(sc)), d1 = d * float(s8(sc + 1u));
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint l4 = load4(ql + 4u * i) >> shift;
        uint h4 = load4(qh + 4u * i) >> (2u * k);
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            int q = int(((l4 >> (8u * b)) & 0xfu) | (((h4 >> (8u * b)) & 3u) << 4)) - 32;
            v[4u * i + b] = (i < 4u ? d0 : d1) * float(q);
        }
    }
#else
    dq32IQ(base, u, v); // dequant_iq.glsl
#endif
}
