#version 450
// bias: Y[i] += B[i % n] for i < total (a bias vector added to every row of n elements, as
// qwen2's Q, K and V projections have).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Bb { float b[]; };
layout(std430, binding = 1) buffer Yb { float y[]; };
layout(push_constant) uniform P { uint total; uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (i >= p.total) return;
    precise float v = y[i] + b[i % p.n];
    y[i] = v;
}
