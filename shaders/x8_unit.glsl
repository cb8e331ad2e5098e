// x8_unit.glsl: one 32-element unit of a weight row times the same unit of activations rounded
// by quantize_x8, on int8 dot products (matvec_x8.glsl, moe_matvec_x8.glsl). The including
// shader declares the weights as both `uint w[]` and `uvec4 w4[]` (one binding, two views) and
// defines one of T_Q4_0, T_Q8_0 (ROW_SPLIT: quants then scales per row), T_Q4_K, T_Q5_K, T_Q6_K,
// T_IQ2_XXS; the kernel calls x8TablesLoad() and barrier() before its first unitDot.
// unitDot(rowByte, nb, u, xa, xb, s): unit u of the row at byte rowByte (nb blocks a row; K-quant
// rows start 16-byte aligned) times x's unit: xa, xb its 32 int8 (elements 0-15, 16-31), s its
// (d, Σq). Integer sums are exact; the scaling is f32.
int idot(uint a, uint b) { return dotPacked4x8EXT(int(a), int(b)); }

// The weights' readers: a 4-byte word, and for Q6_K 4 bytes at a 2-byte aligned offset, an f16
// and an int8; an including shader may define them first to read another copy (matvec_x8's
// COOP_LOAD: a run of blocks copied into shared memory).
#ifndef X8_WORD
#define X8_WORD(i) w[i]
#endif

#if defined(T_IQ2_XXS)
#define IQ_GRIDS_SHARED // the coded grid in shared memory, expanded by x8TablesLoad
#include "dequant.glsl" // its byte readers, block size and the IQ2_XXS grid (dequant_iq.glsl)
// The tables unitDot reads, in shared memory: each grid entry's 8 magnitudes (8, 25, 43) as
// bytes, elements 0-3 in .x; each 7-bit sign field's 8 signs (signs7) as byte masks, 0xff
// where negative. x8TablesLoad fills them; the kernel calls it, then barrier(), first.
shared uvec2 IQ2XXS_BYTES[256];
shared uvec2 IQ2_SIGN_MASKS[128];
// iq2Magnitudes4 turns four 2-bit codes (bits 0-7 of c) into their magnitudes 8 + 17c + c/2,
// a byte each: the codes spread to one a byte, then the arithmetic bytewise (no byte carries:
// 17·2 + 1 + 8 < 256).
uint iq2Magnitudes4(uint c) {
    uint b = (c & 3u) | ((c & 0x0cu) << 6) | ((c & 0x30u) << 12) | ((c & 0xc0u) << 18);
    return 0x08080808u + 17u * b + ((b >> 1) & 0x01010101u);
}
// signMask4 is bits 0-3 of s as bytes, 0xff where set.
uint signMask4(uint s) {
    return ((s & 1u) | ((s & 2u) << 7) | ((s & 4u) << 14) | ((s & 8u) << 21)) * 0xffu;
}
void x8TablesLoad() {
    iqGridsLoad();
    // the sign masks need no grid: before the barrier
    for (uint i = gl_LocalInvocationIndex; i < 128u; i += gl_WorkGroupSize.x) {
        uint sg = signs7(i);
        IQ2_SIGN_MASKS[i] = uvec2(signMask4(sg), signMask4(sg >> 4));
    }
    barrier();
    for (uint i = gl_LocalInvocationIndex; i < 256u; i += gl_WorkGroupSize.x) {
        uint e = grid16(IQ2XXS_GRID, i);
        IQ2XXS_BYTES[i] = uvec2(iq2Magnitudes4(e & 0xffu), iq2Magnitudes4(e >> 8));
    }
}
#elif defined(T_Q6_K)
#include "dequant.glsl" // its byte readers (210-byte blocks start 2-byte aligned) and block size
#ifndef X8_LOAD4
#define X8_LOAD4(o) load4(o)
#define X8_F16AT(o) f16at(o)
#define X8_S8(o) s8(o)
#endif
#elif defined(T_Q4_0)
const uint BLOCK_BYTES = 18u, UNITS_PER_BLOCK = 1u;
#elif defined(T_Q8_0)
const uint BLOCK_BYTES = 34u, UNITS_PER_BLOCK = 1u;
#elif defined(T_Q4_K)
const uint BLOCK_BYTES = 144u, UNITS_PER_BLOCK = 8u;
#elif defined(T_Q5_K)
const uint BLOCK_BYTES = 176u, UNITS_PER_BLOCK = 8u;
#else
#error "x8_unit.glsl: define T_Q4_0, T_Q8_0, T_Q4_K, T_Q5_K, T_Q6_K or T_IQ2_XXS"
#endif
#if !defined(T_IQ2_XXS)
void x8TablesLoad() {} // only IQ2_XXS reads tables
#endif

#if defined(T_Q6_K)
// q6kRun is the 16 bytes at the 2-byte aligned byte off as four words.
uvec4 q6kRun(uint off) {
    uint a = off >> 2;
    bool al = (off & 2u) == 0u;
    uint v0 = X8_WORD(a), v1 = X8_WORD(a + 1u), v2 = X8_WORD(a + 2u), v3 = X8_WORD(a + 3u);
    if (al) return uvec4(v0, v1, v2, v3);
    uint v4 = X8_WORD(a + 4u); // within the block: no run ends it
    return uvec4((v0 >> 16) | (v1 << 16), (v1 >> 16) | (v2 << 16), (v2 >> 16) | (v3 << 16), (v3 >> 16) | (v4 << 16));
}

// q6kChunkDot is matvec_x8's Q6K_WIDE step: elements 16·hh..16·hh+15 of the four quarters k
// (units) of half h of the Q6_K superblock at byte base, times those elements of x (xw[k]: the
// units' 16-element halves hh, xsc[k] their (d, Σq)): the low nibbles of two 16-byte ql runs
// and the 2-bit fields of one qh run, minus 32 bytewise as unitDot forms them, each quarter's
// integer sum scaled by its int8 scale and x's d.
float q6kChunkDot(uint base, uint h, uint hh, uvec4 xw[4], vec2 xsc[4]) {
    uint l0 = 16u * hh;
    uvec4 lo = q6kRun(base + 64u * h + l0), hi = q6kRun(base + 64u * h + 32u + l0), qh = q6kRun(base + 128u + 32u * h + l0);
    float sum = 0.0;
    [[unroll]] for (uint k = 0u; k < 4u; k++) {
        int isum = 0;
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            uint ql = (k & 1u) != 0u ? hi[i] : lo[i];
            uint q = ((ql >> (4u * (k >> 1))) & 0x0f0f0f0fu) | (((qh[i] >> (2u * k)) & 0x03030303u) << 4);
            q = ((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
            isum += idot(q, xw[k][i]);
        }
        sum += float(X8_S8(base + 192u + 8u * h + 2u * k + hh)) * xsc[k].x * float(isum);
    }
    return X8_F16AT(base + 208u) * sum;
}
#endif

// unitDot is unit u of the row at byte rowByte times x's unit (xa, xb: its 32 int8; s: d and Σq).
float unitDot(uint rowByte, uint nb, uint u, uvec4 xa, uvec4 xb, vec2 s) {
#if defined(T_Q4_0)
#if defined(ROW_SPLIT)
    uvec4 q = w4[(rowByte >> 4) + u];
    uint sw = w[(rowByte + 16u * nb + 2u * u) >> 2];
    float d = unpackHalf2x16((u & 1u) != 0u ? sw >> 16 : sw).x;
#else
    uint off = rowByte + 18u * u, a = off >> 2;
    uint ws[5];
    [[unroll]] for (uint i = 0u; i < 5u; i++) ws[i] = X8_WORD(a + i);
    bool al = (off & 2u) == 0u;
    float d = unpackHalf2x16(al ? ws[0] : ws[0] >> 16).x;
    uvec4 q;
    [[unroll]] for (uint i = 0u; i < 4u; i++) q[i] = al ? (ws[i] >> 16) | (ws[i + 1u] << 16) : ws[i + 1u];
#endif
    int isum = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) isum += idot(q[i] & 0x0f0f0f0fu, xa[i]) + idot((q[i] >> 4) & 0x0f0f0f0fu, xb[i]);
    return d * s.x * float(isum - 8 * int(s.y));
#elif defined(T_Q8_0)
#if defined(ROW_SPLIT)
    uvec4 qa = w4[(rowByte >> 4) + 2u * u], qb = w4[(rowByte >> 4) + 2u * u + 1u];
    uint sw = w[(rowByte + 32u * nb + 2u * u) >> 2];
    float d = unpackHalf2x16((u & 1u) != 0u ? sw >> 16 : sw).x;
#else
    uint off = rowByte + 34u * u, a = off >> 2;
    uint ws[9];
    [[unroll]] for (uint i = 0u; i < 9u; i++) ws[i] = X8_WORD(a + i);
    bool al = (off & 2u) == 0u;
    float d = unpackHalf2x16(al ? ws[0] : ws[0] >> 16).x;
    uvec4 qa, qb;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        qa[i] = al ? (ws[i] >> 16) | (ws[i + 1u] << 16) : ws[i + 1u];
        qb[i] = al ? (ws[i + 4u] >> 16) | (ws[i + 5u] << 16) : ws[i + 5u];
    }
#endif
    int isum = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) isum += idot(qa[i], xa[i]) + idot(qb[i], xb[i]);
    return d * s.x * float(isum);
#elif defined(T_Q6_K)
    // unit u is 32-element quarter k = u % 4 of half h = (u / 4) % 2 of superblock u / 8: the
    // low nibbles (ql) and 2 high bits (qh) of its elements, minus 32, in two 16-element halves
    // each with its int8 scale. q - 32 is formed bytewise: ((q | 0x80) - 32) ^ 0x80 never
    // borrows across bytes.
    uint j = u & 7u, h = j >> 2, k = j & 3u, base = rowByte + (u >> 3) * BLOCK_BYTES;
    uint ql = base + 64u * h + (k & 1u) * 32u, qh = base + 128u + 32u * h;
    uint shl = (k >> 1) * 4u, shh = 2u * k;
    int isum0 = 0, isum1 = 0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q = ((X8_LOAD4(ql + 4u * i) >> shl) & 0x0f0f0f0fu) | (((X8_LOAD4(qh + 4u * i) >> shh) & 0x03030303u) << 4);
        q = ((q | 0x80808080u) - 0x20202020u) ^ 0x80808080u;
        if (i < 4u) isum0 += idot(q, xa[i]); else isum1 += idot(q, xb[i - 4u]);
    }
    uint sc = base + 192u + 8u * h + 2u * k;
    return X8_F16AT(base + 208u) * s.x * (float(X8_S8(sc)) * float(isum0) + float(X8_S8(sc + 1u)) * float(isum1));
#elif defined(T_IQ2_XXS)
    // unit u is group g = u % 8 of superblock u / 8: 4 grid indices (8 values each), then a
    // word of four 7-bit sign fields and the 4-bit scale, read as three words (66-byte blocks
    // start 2-byte aligned). Each entry's magnitude bytes are negated bytewise where the sign
    // mask is 0xff ((m ^ 0xff) + 1: magnitudes are at least 8, so no byte borrows).
    uint g = u & 7u, base = rowByte + (u >> 3) * BLOCK_BYTES, p = base + 2u + 8u * g, a = p >> 2;
    bool al = (p & 2u) == 0u;
    uint w0 = X8_WORD(a), w1 = X8_WORD(a + 1u), w2 = al ? 0u : X8_WORD(a + 2u); // an aligned unit may end the binding
    uint idx = al ? w0 : (w0 >> 16) | (w1 << 16), aux = al ? w1 : (w1 >> 16) | (w2 << 16);
    float db = f16at(base) * (float(2u * (aux >> 28) + 1u) * 0.125);
    int isum = 0;
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uvec2 m = IQ2XXS_BYTES[(idx >> (8u * l)) & 0xffu];
        uvec2 n = IQ2_SIGN_MASKS[(aux >> (7u * l)) & 127u];
        uint v0 = (m.x ^ n.x) + (n.x & 0x01010101u), v1 = (m.y ^ n.y) + (n.y & 0x01010101u);
        isum += idot(v0, l < 2u ? xa[2u * l] : xb[2u * l - 4u]) + idot(v1, l < 2u ? xa[2u * l + 1u] : xb[2u * l - 3u]);
    }
    return db * s.x * float(isum);
#else // T_Q4_K, T_Q5_K: unit u is sub-block j = u % 8 of superblock u / 8
    uint j = u & 7u, b4 = (rowByte >> 4) + (u >> 3) * (BLOCK_BYTES / 16u); // 16-byte words
    uvec4 hd = w4[b4];
    vec2 dm = unpackHalf2x16(hd.x);
    // the 12 scale bytes: hd.y (bytes 0-3), hd.z (4-7), hd.w (8-11)
    uint jj = j & 3u, sh8 = 8u * jj;
    float sc, m;
    if (j < 4u) {
        sc = float((hd.y >> sh8) & 63u);
        m = float((hd.z >> sh8) & 63u);
    } else {
        sc = float(((hd.w >> sh8) & 0xfu) | (((hd.y >> sh8) >> 6 & 3u) << 4));
        m = float(((hd.w >> sh8) >> 4 & 0xfu) | (((hd.z >> sh8) >> 6 & 3u) << 4));
    }
#if defined(T_Q5_K)
    uvec4 ha = w4[b4 + 1u], hb = w4[b4 + 2u]; // qh: bit j of byte l is element l's fifth bit
    uint qs4 = b4 + 3u;
#else
    uint qs4 = b4 + 1u;
#endif
    uvec4 qa = w4[qs4 + 2u * (j >> 1)], qb = w4[qs4 + 2u * (j >> 1) + 1u];
    uint shift = 4u * (j & 1u);
    int isum = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint la = (qa[i] >> shift) & 0x0f0f0f0fu, lb = (qb[i] >> shift) & 0x0f0f0f0fu;
#if defined(T_Q5_K)
        la |= ((ha[i] >> j) & 0x01010101u) << 4;
        lb |= ((hb[i] >> j) & 0x01010101u) << 4;
#endif
        isum += idot(la, xa[i]) + idot(lb, xb[i]);
    }
    return s.x * (dm.x * sc * float(isum) - dm.y * m * s.y);
#endif
}

