#version 450
// matvec_norm_f32_route: a decode step's mixture-of-experts router, its product and its routing
// in one dispatch. The workgroups compute the NE router logits y = W·RMSNorm(x)·g
// (matvec_norm_f32.glsl, a row per subgroup of 64 threads); the last workgroup to finish, the
// one whose arrival makes the count in `arrivals` reach the number of workgroups, routes the
// token from them (moe_route.glsl: the same selection and weights as moe_route.comp) and resets
// the count. Each workgroup's logits are written and made visible device-wide (coherent, a
// buffer memory barrier) before it counts itself. One stage fewer a decode step than the
// product then moe_route (VKLLM_GPU_ROUTE_FUSED).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) readonly buffer Gb { vec4 g4[]; };
layout(std430, binding = 3) coherent buffer Yb { float y[]; };
layout(std430, binding = 4) writeonly buffer Ib { uint ids[]; };
layout(std430, binding = 5) writeonly buffer Wtb { float wts[]; };
layout(std430, binding = 6) coherent buffer Cb { uint arrivals[]; };
layout(push_constant) uniform P {
    uint K;      // row length
    uint NE;     // experts (rows)
    float eps;   // the norm's epsilon
    uint USED;   // experts a token (at most 64)
    uint gating; // 1 softmax, 2 sigmoid, 3 softmax over the selected
    uint norm;   // 1: divide the selected weights by their sum
    float scale; // a factor on the weights (1: none)
} p;

#define NORM_THREADS 64u
#define NORM_XMAX 512u // K <= 2048 from shared memory: room for the routing's
#include "matvec_norm_f32.glsl"
#define ROUTE_THREADS 64u
#define ROUTE_LOGIT(t, i) y[i]
#include "moe_route.glsl"

#include "last_arrival.glsl"

void main() {
    uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    float acc = normedRow(row, p.NE);
    if (row < p.NE && subgroupElect()) y[row] = acc;
    if (!lastToArrive(0u, gl_NumWorkGroups.x)) return; // uniform: every workgroup's logits are counted
    routeToken(0u, gl_LocalInvocationID.x);
    arrivalDone(0u); // for the next layer's router
}
