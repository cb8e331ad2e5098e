#version 450
// moe_route: the routing of M tokens (moe_route.glsl), one 64-thread workgroup a token, from
// router logits L (row t at t·NE).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Lb { float logits[]; };
layout(std430, binding = 1) writeonly buffer Ib { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Wb { float wts[]; };
layout(push_constant) uniform P {
    uint NE;     // experts
    uint USED;   // experts per token (at most 64)
    uint M;      // tokens
    uint gating; // 1 softmax, 2 sigmoid, 3 softmax over the selected
    uint norm;   // 1: divide the selected weights by their sum
    float scale; // a factor on the weights (1: none)
} p;

#define ROUTE_THREADS 64u
#define ROUTE_LOGIT(t, i) logits[(t) * p.NE + (i)]
#include "moe_route.glsl"

void main() {
    uint t = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (t >= p.M) return; // uniform over the workgroup
    routeToken(t, gl_LocalInvocationID.x);
}
