#version 450
// pack_f16_swiglu: pack_f16 of the SwiGLU of m rows of k gate and up activations (row t at
// t·k in both): silu(g)·u as swiglu.comp computes it, then rounded to fp16 and packed two a
// word, rows k apart: the down product's operand on the cooperative matrix 2 GEMM, one pass
// instead of swiglu's and pack_f16's. One thread a word.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Gb { vec2 g[]; };
layout(std430, binding = 1) readonly buffer Ub { vec2 u[]; };
layout(std430, binding = 2) writeonly buffer Hb { uint xh[]; };
layout(push_constant) uniform P { uint K; uint M; uint rowsPerGrid; } p;
#include "exact.glsl"

float swiglu(float a, float b) {
    precise float e = 1.0 + expExact(-a);
    float s = divExact(a, e);
    precise float r = s * b;
    return r;
}

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * p.rowsPerGrid * 256u;
    if (i >= p.M * (p.K / 2u)) return;
    vec2 a = g[i], b = u[i];
    xh[i] = packHalf2x16(vec2(swiglu(a.x, b.x), swiglu(a.y, b.y)));
}
