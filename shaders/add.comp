#version 450
// add: Y[i] += A[i] for i < n (the residual connection).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Ab { float a[]; };
layout(std430, binding = 1) buffer Yb { float y[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (i >= p.n) return;
    y[i] += a[i];
}
