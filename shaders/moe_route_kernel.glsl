// moe_route: a mixture-of-experts router's choice on the device. For each of M tokens, from its
// NE router logits (row t of L, stride NE) it selects USED experts and their weights as
// engine/cpu's route does (llama.cpp's build_moe_ffn):
//   gating 1 (softmax):          p = softmax(logits) over all experts, select on p, weights p[S]
//   gating 2 (sigmoid):          p = sigmoid(logits), select on p, weights p[S]
//   gating 3 (softmax selected): select on the logits, weights softmax(logits[S])
// then, with norm, weights / max(Σ weights, 2^-14) (the smallest normal f16, as llama.cpp
// clamps), and times scale. The selection takes the largest first, equal values to the lower
// index, and never a NaN over a number. ids[t·USED + j] and wts[t·USED + j] get the j-th
// choice, best first; nothing goes back to the host.
// One 64-thread workgroup a token, each thread holding the logits of experts tid, tid + 64, ..
// (NE <= 512) in registers: every maximum, sum and arg-max is a subgroup reduction whose
// per-subgroup results meet in shared memory across one barrier (a decode step's routing is
// serial latency: one barrier a selection instead of a seven-level shared-memory tree). exp and
// the divisions are correctly rounded (exact.glsl); the sum of the softmax is an f32 reduction
// (the CPU sums in f64: the weights may differ from its in the last bit, the choice only on an
// exact tie of two rounded probabilities).
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

#include "exact.glsl" // expExact, divExact
#define R_NE p.NE
#define R_USED p.USED
#define R_GATING p.gating
#define R_NORM p.norm
#define R_SCALE p.scale
#include "moe_route.glsl"

void main() {
    uint t = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (t >= p.M) return; // uniform over the workgroup
    routeToken(t, gl_LocalInvocationID.x, true);
}
