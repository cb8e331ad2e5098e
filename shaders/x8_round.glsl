// x8_round.glsl: the arithmetic of rounding a row for the int8 products, a word of four values
// a thread (quantize_x8), and the packed words and their place in the lane-interleaved row,
// which delta_rule_fast's rounded output shares. The block reductions between these steps
// (shared memory, barriers) stay with each caller.
// Needs exact.glsl (divExact, roundHalf).
#ifndef X8_ROUND_GLSL
#define X8_ROUND_GLSL

// x8FirstMax returns v's largest magnitude, and in val its signed value: the first in element
// order on ties (llama.cpp's Q8_K keeps the first).
float x8FirstMax(vec4 v, out float val) {
    vec4 a = abs(v);
    float mag = a.x;
    val = v.x;
    if (a.y > mag) { mag = a.y; val = v.y; }
    if (a.z > mag) { mag = a.z; val = v.z; }
    if (a.w > mag) { mag = a.w; val = v.w; }
    return mag;
}

// x8RoundQ8K rounds v against its 256-block's first largest magnitude bm (signed value bv) as
// Q8_K does: iscale = -127/bv, q = min(127, roundEven(iscale·v)), d = 1/iscale in f32.
ivec4 x8RoundQ8K(vec4 v, float bm, float bv, out float d) {
    float iscale = bm != 0.0 ? divExact(-127.0, bv) : 0.0;
    d = bm != 0.0 ? divExact(1.0, iscale) : 0.0;
    return min(ivec4(roundEven(iscale * v)), ivec4(127));
}

// x8Round32 rounds v against its 32-block's largest magnitude amax: q = roundEven(v·127/amax),
// d = f16(amax/127).
ivec4 x8Round32(vec4 v, float amax, out float d) {
    float inv = amax > 0.0 ? 127.0 / amax : 0.0;
    d = roundHalf(amax / 127.0);
    return ivec4(roundEven(v * inv));
}

// x8Word packs four int8 values, the first in the low byte.
uint x8Word(ivec4 q) {
    return (uint(q.x) & 0xffu) | ((uint(q.y) & 0xffu) << 8) | ((uint(q.z) & 0xffu) << 16) | (uint(q.w) << 24);
}

// x8WordIndex is the index of word j (0..7) of 32-block u in quantize_x8's lane-interleaved
// layout of one row: 32 blocks' first halves, then their second halves, and so on.
uint x8WordIndex(uint u, uint j) {
    return (((u / 32u) * 2u + j / 4u) * 32u + u % 32u) * 4u + j % 4u;
}
#endif
