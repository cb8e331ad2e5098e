// rope_pair.glsl: the rotation of one pair (x0, x1) by (cos, sin) as every rope stage computes
// it, each product rounded before the sum (no fused multiply-add: llama.cpp's CPU order, and
// the same bits in every kernel that rotates): rope.comp, rope_kv.comp, rope_rotate.glsl,
// matvec_x8.glsl's ROPE_KV.
#ifndef ROPE_PAIR_GLSL
#define ROPE_PAIR_GLSL
vec2 ropePair(float x0, float x1, float c, float s) {
    precise float x0c = x0 * c;
    precise float x1s = x1 * s;
    precise float x0s = x0 * s;
    precise float x1c = x1 * c;
    precise float ya = x0c - x1s;
    precise float yb = x0s + x1c;
    return vec2(ya, yb);
}
#endif
