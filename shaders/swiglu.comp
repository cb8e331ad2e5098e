#version 450
// swiglu: Y[i] = silu(G[i]) * U[i] = G[i] / (1 + exp(-G[i])) * U[i] for i < n.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Gb { float g[]; };
layout(std430, binding = 1) readonly buffer Ub { float u[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (i >= p.n) return;
    float a = g[i];
    y[i] = a / (1.0 + exp(-a)) * u[i];
}
