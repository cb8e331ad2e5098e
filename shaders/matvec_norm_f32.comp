#version 450
// matvec_norm_f32: y = W·RMSNorm(x)·g for one token with f32 weights, the norm computed in
// every workgroup (x is a few KB): the mixture-of-experts router of a decode step reads the
// residual stream itself, so the step has no RMSNorm stage before it. Each workgroup sums the
// squares of x (rmsnorm_fast's formula: scale = 1/sqrt(mean(x²) + eps), x·scale·g, in f32), then
// each of its subgroups takes one row: lanes stride over the row's vec4s, a subgroup sum ends
// it. K is a multiple of 4.
//
// The kernel is latency, not bandwidth: a router is 128-256 rows (0.5-2 MB) over 32-64
// workgroups, so each subgroup's loads are issued in batches of UNROLL before any is used (one
// trip to memory a batch where a loop that used each load at once made 16 in series on a
// 2048-wide row), and x, read once for the squares, is kept in shared memory for the rows. Each
// lane adds its vec4s in the same order as the loop that used each load at once.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) readonly buffer Gb { vec4 g4[]; };
layout(std430, binding = 3) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint K; uint N; float eps; } p;

#include "matvec_norm_f32.glsl"

void main() {
    uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    float acc = normedRow(row, p.N);
    if (row < p.N && subgroupElect()) y[row] = acc;
}
