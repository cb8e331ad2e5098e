#version 450
// matvec_swiglu_f32: y (+)= W·(silu(g)·u) for one token with f32 weights, SwiGLU computed by
// each lane for the elements it multiplies (the device's exp and division: every row
// recomputes the K SwiGLUs, so they must be cheap), so a decode step of an f32 model has no
// SwiGLU stage before its FFN down product. Each subgroup takes one row: lanes stride over the
// row's vec4s, a subgroup sum ends it. K is a multiple of 4 and small.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer Gb { vec4 g4[]; };
layout(std430, binding = 2) readonly buffer Ub { vec4 u4[]; };
layout(std430, binding = 3) buffer Yb { float y[]; };
layout(push_constant) uniform P { uint K; uint N; uint accumulate; } p;

void main() {
    uint k4 = p.K / 4u;
    uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    if (row >= p.N) return;
    float acc = 0.0;
    for (uint i = gl_SubgroupInvocationID; i < k4; i += gl_SubgroupSize) {
        vec4 a = g4[i];
        acc += dot(w4[row * k4 + i], a / (1.0 + exp(-a)) * u4[i]);
    }
    acc = subgroupAdd(acc);
    if (subgroupElect()) y[row] = p.accumulate != 0u ? y[row] + acc : acc;
}
