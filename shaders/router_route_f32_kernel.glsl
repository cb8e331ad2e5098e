// router_route_f32: a decode step's mixture-of-experts router and its choice in one dispatch.
// Every workgroup computes its rows of logits = W·RMSNorm(x)·g as matvec_norm_f32 does
// (matvec_norm_f32.glsl, the same arithmetic), and the workgroup that finishes last then
// chooses the token's experts from all NE logits as moe_route does (moe_route.glsl on its first
// 64 threads: the same choice and weights), so the route needs no stage of its own.
// "Last" is counted in arrivals[0] (last_arrival.glsl): the last workgroup reads every
// workgroup's logits through the coherent binding, and sets the count back to 0 for the next
// layer's router (a later dispatch, after the pipeline barrier between stages).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) readonly buffer Gb { vec4 g4[]; };
layout(std430, binding = 3) coherent buffer Lb { float logits[]; };
layout(std430, binding = 4) writeonly buffer Ib { uint ids[]; };
layout(std430, binding = 5) writeonly buffer Wtb { float wts[]; };
layout(std430, binding = 6) coherent buffer Cb { uint arrivals[]; };
layout(push_constant) uniform P {
    uint K;      // the row length (dim, a multiple of 4)
    uint N;      // rows: the experts
    float eps;   // the norm's
    uint USED;   // experts per token (at most 64)
    uint gating; // 1 softmax, 2 sigmoid, 3 softmax over the selected
    uint norm;   // 1: divide the selected weights by their sum
    float scale; // a factor on the weights (1: none)
} p;

// x kept in shared memory up to K = 3072, leaving room for the route's reductions within
// Vulkan's least 16 KB of shared memory (wider rows read x4 again).
#define NORM_XMAX 768u
#include "matvec_norm_f32.glsl"

#include "exact.glsl" // expExact, divExact
#define R_NE p.N
#define R_USED p.USED
#define R_GATING p.gating
#define R_NORM p.norm
#define R_SCALE p.scale
#include "moe_route.glsl"
#include "last_arrival.glsl"

void main() {
    uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    float acc = normedRow(row, p.N);
    if (row < p.N && subgroupElect()) logits[row] = acc;
    if (!lastToArrive(0u, gl_NumWorkGroups.x)) return; // uniform over the workgroup
    arrivalDone(0u);
    routeToken(0u, gl_LocalInvocationID.x, true);
}
