#version 450
// swiglu: Y[i] = silu(G[i]) * U[i] = G[i] / (1 + exp(-G[i])) * U[i] for i < n, rounded as
// llama.cpp's CPU path rounds it (a correctly rounded exp, then a division and a product):
// the result is the next quantized product's input, where a last-bit difference can flip an
// 8-bit rounding.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Gb { float g[]; };
layout(std430, binding = 1) readonly buffer Ub { float u[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint n; } p;
#include "exact.glsl"
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (i >= p.n) return;
    float a = g[i];
    precise float e = 1.0 + expExact(-a);
    float s = divExact(a, e);
    precise float r = s * u[i];
    y[i] = r;
}
