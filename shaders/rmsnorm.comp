#version 450
// rmsnorm: Y[t][i] = X[t][i] / sqrt(mean_i(X[t]^2) + eps) * g[i]; one workgroup per token.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Gb { float g[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint n; uint M; uint stride; float eps; } p;
shared float red[64];
void main() {
    uint t = gl_WorkGroupID.x;
    if (t >= p.M) return;
    uint tid = gl_LocalInvocationID.x;
    uint base = t * p.stride;
    float s = 0.0;
    for (uint i = tid; i < p.n; i += 64u) s += x[base + i] * x[base + i];
    red[tid] = s;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
        if (tid < k) red[tid] += red[tid + k];
        barrier();
    }
    float scale = inversesqrt(red[0] / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += 64u) y[base + i] = x[base + i] * scale * g[i];
}
