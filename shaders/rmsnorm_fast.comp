#version 450
// rmsnorm_fast: the fast tier's RMSNorm, Y[t][i] = X[t][i] · g[i] / sqrt(mean(X[t]^2) + eps),
// in plain f32 (the exact tier's rmsnorm.comp keeps llama.cpp's CPU rounding). One workgroup
// per token row; subgroup sums, then one shared-memory pass over the subgroups.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Gb { float g[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint n; uint M; uint stride; float eps; } p;
shared float part[64];

void main() {
    uint t = gl_WorkGroupID.x;
    if (t >= p.M) return;
    uint tid = gl_LocalInvocationID.x;
    uint base = t * p.stride;
    float ss = 0.0;
    for (uint i = tid; i < p.n; i += 256u) ss += x[base + i] * x[base + i];
    ss = subgroupAdd(ss);
    if (subgroupElect()) part[gl_SubgroupID] = ss;
    barrier();
    float sum = 0.0;
    for (uint s = 0u; s < gl_NumSubgroups; s++) sum += part[s];
    float scale = inversesqrt(sum / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += 256u) y[base + i] = x[base + i] * scale * g[i];
}
