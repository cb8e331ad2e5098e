#version 450
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

const uint THREADS = 64u;         // the workgroup's
const uint PER = 512u / THREADS; // experts a thread holds: NE <= 512
shared float redF[2][64]; // per-subgroup partial results (at most 64 subgroups), two slots used in turn
shared uint redU[2][64];
shared uint redI[2][64]; // wgArgMax's per-subgroup indices
shared uint sel[64];
shared float selP[64];

// Each reduction writes its subgroup's result into slot `slot`, waits once, and combines every
// subgroup's; consecutive reductions alternate slots, so a slot is rewritten only after every
// thread has passed the barrier of the reduction in between (and so has read it).
float wgMaxF(float v, uint slot) {
    v = subgroupMax(v);
    if (subgroupElect()) redF[slot][gl_SubgroupID] = v;
    barrier();
    float r = redF[slot][0];
    for (uint g = 1u; g < gl_NumSubgroups; g++) r = max(r, redF[slot][g]);
    return r;
}
float wgSumF(float v, uint slot) {
    v = subgroupAdd(v);
    if (subgroupElect()) redF[slot][gl_SubgroupID] = v;
    barrier();
    float r = redF[slot][0];
    for (uint g = 1u; g < gl_NumSubgroups; g++) r += redF[slot][g];
    return r;
}
// wgArgMax returns the index of the workgroup's largest key, the lowest index among equal keys
// (bi: this thread's best index for its key bk): each subgroup reduces its own (key, index),
// and the subgroups' pairs meet across one barrier (a selection took two before).
uint wgArgMax(uint bk, uint bi, uint slot) {
    uint sk = subgroupMax(bk);
    uint si = subgroupMin(bk == sk ? bi : 0xffffffffu);
    if (subgroupElect()) {
        redU[slot][gl_SubgroupID] = sk;
        redI[slot][gl_SubgroupID] = si;
    }
    barrier();
    uint rk = redU[slot][0], ri = redI[slot][0];
    for (uint g = 1u; g < gl_NumSubgroups; g++) {
        uint k = redU[slot][g], i = redI[slot][g];
        if (k > rk || (k == rk && i < ri)) {
            rk = k;
            ri = i;
        }
    }
    return ri;
}

// rankKey orders candidates as the selection does: larger values first (-0 as +0), any number
// before a NaN, a NaN before no candidate (0); equal keys go to the lower index.
uint rankKey(float v, bool present) {
    if (!present) return 0u;
    if (isnan(v)) return 1u;
    uint u = floatBitsToUint(v == 0.0 ? 0.0 : v);
    return (u >> 31) != 0u ? ~u : (u | 0x80000000u);
}

// routeToken writes token t's choice and weights (ids and wts from t·USED); every thread of the
// workgroup calls it (tid: its index, < THREADS).
void routeToken(uint t, uint tid) {
    float prob[PER];
    [[unroll]] for (uint k = 0u; k < PER; k++) {
        uint i = tid + THREADS * k;
        prob[k] = i < p.NE ? logits[t * p.NE + i] : 0.0;
    }
    uint slot = 0u;
    if (p.gating == 1u) {
        float mx = -1.0 / 0.0;
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            if (tid + THREADS * k < p.NE) mx = max(mx, prob[k]);
        }
        mx = wgMaxF(mx, slot);
        slot ^= 1u;
        float sum = 0.0;
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            if (tid + THREADS * k < p.NE) {
                precise float d = prob[k] - mx;
                prob[k] = expExact(d);
                sum += prob[k];
            }
        }
        float inv = divExact(1.0, wgSumF(sum, slot));
        slot ^= 1u;
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            precise float v = prob[k] * inv;
            prob[k] = v;
        }
    } else if (p.gating == 2u) {
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            if (tid + THREADS * k < p.NE) {
                precise float d = 1.0 + expExact(-prob[k]);
                prob[k] = divExact(1.0, d);
            }
        }
    }
    uint taken = 0u; // bit k: expert tid + THREADS·k is chosen
    for (uint j = 0u; j < p.USED; j++) {
        uint bk = 0u, bi = 0xffffffffu; // this thread's best untaken expert (ascending k: ties keep the lower index)
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            uint i = tid + THREADS * k;
            uint key = rankKey(prob[k], i < p.NE && (taken & (1u << k)) == 0u);
            if (key > bk) {
                bk = key;
                bi = i;
            }
        }
        uint choice = wgArgMax(bk, bi, slot);
        slot ^= 1u;
        if (choice % THREADS == tid) { // the owner marks it and hands its probability over
            uint k = choice / THREADS;
            taken |= 1u << k;
            float v = prob[0];
            [[unroll]] for (uint kk = 1u; kk < PER; kk++) if (kk == k) v = prob[kk];
            sel[j] = choice;
            selP[j] = v;
        }
    }
    // The weights: thread j < USED takes choice j. Every sum runs over the choices in order
    // (j = 0, 1, ..), the same f32 operations the CPU's route makes, each thread reading them
    // from shared memory: one exp and one or two divisions a thread instead of USED of each in
    // one thread.
    barrier(); // sel and selP hold every choice
    bool mine = tid < p.USED;
    float w = mine ? selP[tid] : 0.0;
    if (p.gating == 3u) {
        float mx = selP[0];
        for (uint j = 1u; j < p.USED; j++) mx = max(mx, selP[j]);
        if (mine) {
            precise float d = w - mx;
            w = expExact(d);
        }
        barrier(); // every thread has read selP
        if (mine) selP[tid] = w;
        barrier();
        float sum = 0.0;
        for (uint j = 0u; j < p.USED; j++) sum += selP[j];
        float inv = divExact(1.0, sum);
        precise float v = w * inv;
        w = v;
    }
    if (p.norm != 0u) {
        barrier(); // every thread has read selP
        if (mine) selP[tid] = w;
        barrier();
        float sum = 0.0;
        for (uint j = 0u; j < p.USED; j++) sum += selP[j];
        float total = max(sum, 6.103515625e-5);
        w = divExact(w, total);
    }
    if (mine) {
        precise float v = p.scale == 1.0 ? w : w * p.scale;
        ids[t * p.USED + tid] = sel[tid];
        wts[t * p.USED + tid] = v;
    }
}

void main() {
    uint t = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (t >= p.M) return; // uniform over the workgroup
    routeToken(t, gl_LocalInvocationID.x);
}
