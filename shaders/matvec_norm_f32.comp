#version 450
// matvec_norm_f32: y = W·RMSNorm(x)·g for one token with f32 weights, the norm computed in
// every workgroup (x is a few KB): the mixture-of-experts router of a decode step reads the
// residual stream itself, so the step has no RMSNorm stage before it. Each workgroup sums the
// squares of x (rmsnorm_fast's formula: scale = 1/sqrt(mean(x²) + eps), x·scale·g, in f32), then
// each of its subgroups takes one row: lanes stride over the row's vec4s, a subgroup sum ends
// it. K is a multiple of 4.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) readonly buffer Gb { vec4 g4[]; };
layout(std430, binding = 3) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint K; uint N; float eps; } p;
shared float part[128];

void main() {
    uint tid = gl_LocalInvocationID.x, k4 = p.K / 4u;
    float ss = 0.0;
    for (uint i = tid; i < k4; i += 128u) {
        vec4 v = x4[i];
        ss += dot(v, v);
    }
    ss = subgroupAdd(ss);
    if (subgroupElect()) part[gl_SubgroupID] = ss;
    barrier();
    float total = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; g++) total += part[g];
    float scale = inversesqrt(total / float(p.K) + p.eps);
    uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    if (row >= p.N) return;
    float acc = 0.0;
    for (uint i = gl_SubgroupInvocationID; i < k4; i += gl_SubgroupSize) acc += dot(w4[row * k4 + i], x4[i] * scale * g4[i]);
    acc = subgroupAdd(acc);
    if (subgroupElect()) y[row] = acc;
}
