#version 450
// matvec_norm_f32: y = W·RMSNorm(x)·g for one token with f32 weights (matvec_norm_f32.glsl), a
// row per subgroup of a 128-thread workgroup.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) readonly buffer Gb { vec4 g4[]; };
layout(std430, binding = 3) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint K; uint N; float eps; } p;

#define NORM_THREADS 128u
#include "matvec_norm_f32.glsl"

void main() {
    uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    float acc = normedRow(row, p.N);
    if (row < p.N && subgroupElect()) y[row] = acc;
}
