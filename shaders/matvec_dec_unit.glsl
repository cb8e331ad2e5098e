// matvec_dec_unit.glsl: one 32-element unit of a weight row times the same unit of the int8
// activations, for matvec_dec.glsl. Included once per weight buffer: the includer defines WB
// (the buffer's uint array), UNIT_DOT (the function's name) and WORDS8_, B8_, U16_ (its
// helpers' names). Returns the unit's product in
// units of the activation block's scale: the caller multiplies by it.
//   xq: the unit's 32 activations as int8, four to a word, element order;
//   sx: their sums, sx[h] over elements 16h..16h+15.
// Weight bytes pair with activation bytes through dotPacked4x8EXT (signed x signed: the
// unsigned quants 0..63 are non-negative int8s), so each sum is an exact integer.

// WORDS8: the 8 words of 32 weight bytes at byte offset off (2-byte aligned: a misaligned run
// is read as 9 words and shifted).
void WORDS8_(uint off, out uint q[8]) {
    uint a = off >> 2;
    if ((off & 2u) == 0u) {
        [[unroll]] for (uint i = 0u; i < 8u; i++) q[i] = WB[a + i];
    } else {
        uint prev = WB[a];
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            uint next = WB[a + i + 1u];
            q[i] = (prev >> 16) | (next << 16);
            prev = next;
        }
    }
}

uint B8_(uint off) { return (WB[off >> 2] >> ((off & 3u) << 3)) & 0xffu; }
uint U16_(uint off) { return (WB[off >> 2] >> ((off & 2u) << 3)) & 0xffffu; }

float UNIT_DOT(uint rowByte, uint u, uint xq[8], int sx[2]) {
#if defined(T_Q4_0)
    uint off = rowByte + 18u * u;
    float d = unpackHalf2x16(U16_(off)).x;
    // the 16 bytes after the scale: element j in byte j's low nibble, j+16 in its high one
    uint a = (off + 2u) >> 2;
    uint ws[5];
    [[unroll]] for (uint i = 0u; i < 5u; i++) ws[i] = WB[a + i];
    bool al = ((off + 2u) & 2u) == 0u;
    int s = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q = al ? ws[i] : (ws[i] >> 16) | (ws[i + 1u] << 16);
        s += idot(q & 0x0f0f0f0fu, xq[i]);
        s += idot((q >> 4) & 0x0f0f0f0fu, xq[i + 4u]);
    }
    return d * float(s - 8 * (sx[0] + sx[1]));
#elif defined(T_Q8_0)
    uint off = rowByte + 34u * u;
    float d = unpackHalf2x16(U16_(off)).x;
    uint q[8];
    WORDS8_(off + 2u, q);
    int s = 0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) s += idot(q[i], xq[i]);
    return d * float(s);
#elif defined(T_Q4_K) || defined(T_Q5_K)
    uint b = u >> 3, j = u & 7u; // superblock, 32-element sub-block
#if defined(T_Q4_K)
    uint base = rowByte + 144u * b, qs = base + 16u;
#else
    uint base = rowByte + 176u * b, qs = base + 48u;
#endif
    vec2 dm = unpackHalf2x16(WB[base >> 2]);
    uint sb = base + 4u; // the 12 packed 6-bit scales and mins
    float sc, mn;
    if (j < 4u) {
        sc = float(B8_(sb + j) & 63u);
        mn = float(B8_(sb + j + 4u) & 63u);
    } else {
        sc = float((B8_(sb + j + 4u) & 0xfu) | ((B8_(sb + j - 4u) >> 6) << 4));
        mn = float((B8_(sb + j + 4u) >> 4) | ((B8_(sb + j) >> 6) << 4));
    }
    uint a = (qs + 32u * (j >> 1)) >> 2, shift = (j & 1u) * 4u;
#if defined(T_Q5_K)
    uint h = (base + 16u) >> 2;
#endif
    int s = 0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q = (WB[a + i] >> shift) & 0x0f0f0f0fu;
#if defined(T_Q5_K)
        q |= ((WB[h + i] >> j) & 0x01010101u) << 4;
#endif
        s += idot(q, xq[i]);
    }
    return dm.x * sc * float(s) - dm.y * mn * float(sx[0] + sx[1]);
#elif defined(T_Q6_K)
    uint b = u >> 3, j = u & 7u;
    uint base = rowByte + 210u * b; // 2-byte aligned
    uint hh = j >> 2, k = j & 3u;   // half of the superblock, quarter within it
    uint ql[8], qh[8];
    WORDS8_(base + 64u * hh + 32u * (k & 1u), ql);
    WORDS8_(base + 128u + 32u * hh, qh);
    uint shl = (k >> 1) * 4u, shh = 2u * k;
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q = ((ql[i] >> shl) & 0x0f0f0f0fu) | (((qh[i] >> shh) & 0x03030303u) << 4);
        if (i < 4u) s0 += idot(q, xq[i]);
        else s1 += idot(q, xq[i]);
    }
    uint si = base + 192u + 8u * hh + 2u * k; // the two int8 scales of this unit's 16-halves
    float sc0 = float(int(B8_(si) << 24) >> 24), sc1 = float(int(B8_(si + 1u) << 24) >> 24);
    float d = unpackHalf2x16(U16_(base + 208u)).x;
    return d * (sc0 * float(s0 - 32 * sx[0]) + sc1 * float(s1 - 32 * sx[1]));
#elif defined(T_Q3_K)
    uint b = u >> 3, j = u & 7u;
    uint base = rowByte + 110u * b; // 2-byte aligned
    uint hh = j >> 2, k = j & 3u;   // half of the superblock, quarter within it
    uint qs[8], hm[8];
    WORDS8_(base + 32u + 32u * hh, qs);
    WORDS8_(base, hm);
    uint shq = 2u * k, shh = 4u * hh + k;
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q = ((qs[i] >> shq) & 0x03030303u) | (((hm[i] >> shh) & 0x01010101u) << 2); // q + 4·high, 0..7
        if (i < 4u) s0 += idot(q, xq[i]);
        else s1 += idot(q, xq[i]);
    }
    // scales 2j and 2j + 1: low nibbles of byte (2j)%8 and the next (high ones from j = 4
    // on), top bits in byte 8 + (2j)%4 and the next at bit 2·(2j/4)
    uint sb = base + 96u, j0 = 2u * j, j1 = j0 + 1u;
    int sc0 = int(((B8_(sb + (j0 & 7u)) >> (4u * (j0 >> 3))) & 0xfu) | (((B8_(sb + 8u + (j0 & 3u)) >> (2u * (j0 >> 2))) & 3u) << 4)) - 32;
    int sc1 = int(((B8_(sb + (j1 & 7u)) >> (4u * (j1 >> 3))) & 0xfu) | (((B8_(sb + 8u + (j1 & 3u)) >> (2u * (j1 >> 2))) & 3u) << 4)) - 32;
    float d = unpackHalf2x16(U16_(base + 108u)).x;
    return d * (float(sc0) * float(s0 - 4 * sx[0]) + float(sc1) * float(s1 - 4 * sx[1]));
#elif defined(T_Q2_K)
    uint b = u >> 3, j = u & 7u;
    uint base = rowByte + 84u * b;
    uint hh = j >> 2, k = j & 3u; // half of the superblock, quarter within it
    uint qs[8];
    WORDS8_(base + 16u + 32u * hh, qs);
    uint sh = 2u * k;
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q = (qs[i] >> sh) & 0x03030303u;
        if (i < 4u) s0 += idot(q, xq[i]);
        else s1 += idot(q, xq[i]);
    }
    // scale bytes 2j and 2j + 1 (low nibble the scale, high the min); both sums stay integers
    // as in llama.cpp's CPU product: d·Σ scale·s − dmin·Σ min·sx
    uint sc0 = B8_(base + 2u * j), sc1 = B8_(base + 2u * j + 1u);
    int si = int(sc0 & 0xfu) * s0 + int(sc1 & 0xfu) * s1;
    int mi = int(sc0 >> 4) * sx[0] + int(sc1 >> 4) * sx[1];
    float d = unpackHalf2x16(U16_(base + 80u)).x, dmin = unpackHalf2x16(U16_(base + 82u)).x;
    return d * float(si) - dmin * float(mi);
#else
#error "matvec_dec_unit.glsl: define T_Q4_0, T_Q8_0, T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K or T_Q6_K"
#endif
}
