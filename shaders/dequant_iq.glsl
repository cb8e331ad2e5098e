// dequant_iq.glsl: dq32IQ, dq32 for the non-linear quants (IQ4_NL, IQ4_XS, MXFP4) and the grid
// i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M); included by dequant.glsl
// after its byte readers and block sizes. Layouts and formulas are GGML's (ggml-common.h); the
// codebooks come from iq_grids.glsl, generated from engine/quant's dequantizers. Each element
// is computed in engine/quant's order (block scale times the integer scale times the unit,
// then times the signed integer from the codebook), every step exact in f32, so dq32 equals
// engine/quant.Dequantize bit for bit (kernels_iq_test.go holds it to that). A kernel that
// defines IQ_GRIDS_SHARED before including dequant.glsl keeps the grids in shared memory and
// must call iqGridsLoad() and barrier() before its first dq32 (embed_iq.glsl, matmul_iq.glsl,
// matvec_fast.glsl, moe_gemm_coopmat.glsl, dequant_f16.glsl do); the others (matmul_coopmat.glsl,
// whose shared memory is nearly full) read constant arrays.

#if defined(T_IQ4_NL) || defined(T_IQ4_XS) || defined(T_MXFP4) || defined(T_IQ2_XXS) || defined(T_IQ2_XS) || defined(T_IQ2_S) || defined(T_IQ3_XXS) || defined(T_IQ3_S) || defined(T_IQ1_S) || defined(T_IQ1_M)
#define T_IQUANT
#include "iq_grids.glsl"
#if defined(T_IQ4_NL) || defined(T_IQ4_XS) || defined(T_MXFP4)
void iqGridsLoad() {} // 16-value tables only: constant arrays
#endif

// signs7 expands 7 stored sign bits to 8: the eighth makes the count of minus signs even.
uint signs7(uint s) {
    s &= 127u;
    return s | ((uint(bitCount(s)) & 1u) << 7);
}

// gridByte is byte j of a 4-element grid word.
float gridByte(uint word, uint j) { return float((word >> (8u * j)) & 0xffu); }

// grid16 is the 16-bit entry i of a 2-bit-coded grid (two entries a word).
#define grid16(G, i) ((G[(i) >> 1] >> (16u * ((i) & 1u))) & 0xffffu)

#if defined(T_IQ2_XXS) || defined(T_IQ2_XS) || defined(T_IQ2_S)
// put8 writes 8 elements at v[o..o+7]: db times the magnitudes of the IQ2 grid entry e (2-bit
// codes 0, 1, 2 for 8, 25, 43), negated where the sign bit is set.
void put8(inout float v[32], uint o, float db, uint e, uint signs) {
    [[unroll]] for (uint j = 0u; j < 8u; j++) {
        uint c = (e >> (2u * j)) & 3u;
        float m = float(8u + 17u * c + (c >> 1));
        v[o + j] = db * (((signs >> j) & 1u) != 0u ? -m : m);
    }
}
#endif

#if defined(T_IQ3_XXS) || defined(T_IQ3_S)
// put4 writes 4 elements at v[o..o+3]: db times the grid word's magnitudes, negated where
// the sign bit is set.
void put4(inout float v[32], uint o, float db, uint g, uint signs) {
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        float m = gridByte(g, j);
        v[o + j] = db * (((signs >> j) & 1u) != 0u ? -m : m);
    }
}
#endif

#if defined(T_IQ1_S) || defined(T_IQ1_M)
// put8Delta writes db·(8·g ± 1) for the 8 values g of IQ1 grid entry e (2-bit codes c for
// g = c - 1; minus when neg).
void put8Delta(inout float v[32], uint o, float db, uint e, bool neg) {
    float delta = neg ? -1.0 : 1.0;
    [[unroll]] for (uint j = 0u; j < 8u; j++) v[o + j] = db * (8.0 * float(int((e >> (2u * j)) & 3u) - 1) + delta);
}
#endif

#if defined(T_IQ4_NL) || defined(T_IQ4_XS) || defined(T_MXFP4)
// nibbles16 writes the 32 elements of 16 bytes of 4-bit codes (element j the low nibble of
// byte j, element j+16 its high nibble) as d·table[code]; the bytes are the words q4[0..3].
void nibbles16(inout float v[32], float d, uint q4[4]) {
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            uint q = (q4[i] >> (8u * b)) & 0xffu;
#if defined(T_MXFP4)
            v[4u * i + b] = d * MXFP4_VALUES[q & 0xfu];
            v[4u * i + b + 16u] = d * MXFP4_VALUES[q >> 4];
#else
            v[4u * i + b] = d * IQ4NL_VALUES[q & 0xfu];
            v[4u * i + b + 16u] = d * IQ4NL_VALUES[q >> 4];
#endif
        }
    }
}
#endif

#if defined(T_MXFP4)
// e8m0Half is half the E8M0 scale 2^(e-127) (the halving undoes the doubled E2M1 table).
float e8m0Half(uint e) { return e < 2u ? uintBitsToFloat(0x00200000u << e) : uintBitsToFloat((e - 1u) << 23); }
// bytes4 is the 4 bytes at any offset.
uint bytes4(uint off) { return b8(off) | (b8(off + 1u) << 8) | (b8(off + 2u) << 16) | (b8(off + 3u) << 24); }
#endif

void dq32IQ(uint base, uint u, out float v[32]) {
#if defined(T_IQ4_NL)
    uint q4[4];
    [[unroll]] for (uint i = 0u; i < 4u; i++) q4[i] = load4(base + 2u + 4u * i);
    nibbles16(v, f16at(base), q4);
#elif defined(T_MXFP4)
    uint q4[4];
    [[unroll]] for (uint i = 0u; i < 4u; i++) q4[i] = bytes4(base + 1u + 4u * i);
    nibbles16(v, e8m0Half(b8(base)), q4);
#elif defined(T_IQ4_XS)
    // sub-block u: 6-bit scale = nibble u of scales_l | bits 2u, 2u+1 of scales_h << 4
    uint ls = ((b8(base + 4u + (u >> 1)) >> (4u * (u & 1u))) & 0xfu) | (((u16(base + 2u) >> (2u * u)) & 3u) << 4);
    uint q4[4];
    [[unroll]] for (uint i = 0u; i < 4u; i++) q4[i] = load4(base + 8u + 16u * u + 4u * i);
    nibbles16(v, f16at(base) * float(int(ls) - 32), q4);
#elif defined(T_IQ2_XXS)
    // group u: 4 index bytes, then a word of four 7-bit sign fields and the 4-bit scale
    uint p = base + 2u + 8u * u;
    uint aux = u32at(p + 4u);
    float db = f16at(base) * (float(2u * (aux >> 28) + 1u) * 0.125);
    [[unroll]] for (uint l = 0u; l < 4u; l++) put8(v, 8u * l, db, grid16(IQ2XXS_GRID, b8(p + l)), signs7(aux >> (7u * l)));
#elif defined(T_IQ2_XS)
    // group u: 4 uint16 of a 9-bit index and 7 sign bits; a scale byte, one nibble per half
    float d = f16at(base);
    uint sc = b8(base + 66u + u);
    float db0 = d * (float(2u * (sc & 0xfu) + 1u) * 0.125), db1 = d * (float(2u * (sc >> 4) + 1u) * 0.125);
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uint q = u16(base + 2u + 2u * (4u * u + l));
        put8(v, 8u * l, l < 2u ? db0 : db1, grid16(IQ2XS_GRID, q & 511u), signs7(q >> 9));
    }
#elif defined(T_IQ2_S)
    // group u: 4 low index bytes, 4 sign bytes, 2 high bits per index in qh, a scale byte
    float d = f16at(base);
    uint qh = b8(base + 66u + u);
    uint sc = b8(base + 74u + u);
    float db0 = d * (float(2u * (sc & 0xfu) + 1u) * 0.125), db1 = d * (float(2u * (sc >> 4) + 1u) * 0.125);
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uint idx = b8(base + 2u + 4u * u + l) | ((qh << (8u - 2u * l)) & 0x300u);
        put8(v, 8u * l, l < 2u ? db0 : db1, grid16(IQ2S_GRID, idx), b8(base + 34u + 4u * u + l));
    }
#elif defined(T_IQ3_XXS)
    // group u: 8 index bytes (4-value entries); a word of four 7-bit sign fields and the scale
    uint aux = u32at(base + 66u + 4u * u);
    float db = f16at(base) * (float(2u * (aux >> 28) + 1u) * 0.25);
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uint s = signs7(aux >> (7u * l));
        put4(v, 8u * l, db, IQ3XXS_GRID[b8(base + 2u + 8u * u + 2u * l)], s);
        put4(v, 8u * l + 4u, db, IQ3XXS_GRID[b8(base + 3u + 8u * u + 2u * l)], s >> 4);
    }
#elif defined(T_IQ3_S)
    // group u: 8 low index bytes, their 9th bits in qh, 4 sign bytes, a scale nibble
    uint qh = b8(base + 66u + u);
    float db = f16at(base) * float(2u * ((b8(base + 106u + (u >> 1)) >> (4u * (u & 1u))) & 0xfu) + 1u);
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
        uint idx = b8(base + 2u + 8u * u + k) | (((qh >> k) & 1u) << 8);
        put4(v, 4u * k, db, IQ3S_GRID[idx], b8(base + 74u + 4u * u + (k >> 1)) >> (4u * (k & 1u)));
    }
#elif defined(T_IQ1_S)
    // group u: 4 low index bytes; a uint16 with 3 high bits per index, the scale, delta's sign
    uint h = u16(base + 34u + 2u * u);
    float db = f16at(base) * (float(2u * ((h >> 12) & 7u) + 1u) * 0.125);
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uint idx = b8(base + 2u + 4u * u + l) | (((h >> (3u * l)) & 7u) << 8);
        put8Delta(v, 8u * l, db, grid16(IQ1S_GRID, idx), (h & 0x8000u) != 0u);
    }
#elif defined(T_IQ1_M)
    // the block scale: the top nibbles of the 4 scale words, first word lowest
    uint s0 = load4(base + 48u), s1 = load4(base + 52u);
    uint dh = ((s0 >> 12) & 0xfu) | ((s0 >> 24) & 0xf0u) | ((s1 >> 4) & 0xf00u) | ((s1 >> 16) & 0xf000u);
    float d = unpackHalf2x16(dh).x;
    uint sw = u16(base + 48u + 2u * (u >> 1)) >> (6u * (u & 1u));
    float db0 = d * (float(2u * (sw & 7u) + 1u) * 0.125), db1 = d * (float(2u * ((sw >> 3) & 7u) + 1u) * 0.125);
    [[unroll]] for (uint l = 0u; l < 4u; l++) {
        uint nib = (b8(base + 32u + 2u * u + (l >> 1)) >> (4u * (l & 1u))) & 0xfu;
        uint idx = b8(base + 4u * u + l) | ((nib & 7u) << 8);
        put8Delta(v, 8u * l, l < 2u ? db0 : db1, grid16(IQ1S_GRID, idx), (nib & 8u) != 0u);
    }
#endif
}
#endif
