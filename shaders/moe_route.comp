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
// One 64-thread workgroup per token: the maximum, the sum and each of the USED arg-maxes are
// shared-memory reductions over the logits held in shared memory (NE <= 512); exp and the
// divisions are correctly rounded (exact.glsl), the sum of the softmax is an f32 tree (the CPU
// sums in f64: the weights may differ from its in the last bit, the choice only on an exact
// tie of two rounded probabilities).
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

const uint MAX_E = 512u;
shared float prob[MAX_E];
shared uint taken[MAX_E];
shared float redV[64];
shared uint redI[64];
shared uint sel[64];

// better reports whether value a at index ia goes before b at ib.
bool better(float a, uint ia, float b, uint ib) {
    if (ib == 0xffffffffu) return ia != 0xffffffffu;
    if (ia == 0xffffffffu) return false;
    if (isnan(a) != isnan(b)) return !isnan(a);
    if (!isnan(a) && a != b) return a > b;
    return ia < ib;
}

void main() {
    uint t = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (t >= p.M) return; // uniform over the workgroup
    uint tid = gl_LocalInvocationID.x;
    uint row = t * p.NE;
    for (uint i = tid; i < p.NE; i += 64u) {
        prob[i] = logits[row + i];
        taken[i] = 0u;
    }
    barrier();
    if (p.gating == 1u) {
        float mx = -1.0 / 0.0;
        for (uint i = tid; i < p.NE; i += 64u) mx = max(mx, prob[i]);
        redV[tid] = mx;
        barrier();
        for (uint s = 32u; s > 0u; s >>= 1) {
            if (tid < s) redV[tid] = max(redV[tid], redV[tid + s]);
            barrier();
        }
        mx = redV[0];
        barrier();
        float sum = 0.0;
        for (uint i = tid; i < p.NE; i += 64u) {
            precise float d = prob[i] - mx;
            float e = expExact(d);
            prob[i] = e;
            sum += e;
        }
        redV[tid] = sum;
        barrier();
        for (uint s = 32u; s > 0u; s >>= 1) {
            if (tid < s) redV[tid] += redV[tid + s];
            barrier();
        }
        float inv = divExact(1.0, redV[0]);
        barrier();
        for (uint i = tid; i < p.NE; i += 64u) {
            precise float v = prob[i] * inv;
            prob[i] = v;
        }
        barrier();
    } else if (p.gating == 2u) {
        for (uint i = tid; i < p.NE; i += 64u) {
            precise float d = 1.0 + expExact(-prob[i]);
            prob[i] = divExact(1.0, d);
        }
        barrier();
    }
    for (uint j = 0u; j < p.USED; j++) {
        float bv = 0.0;
        uint bi = 0xffffffffu;
        for (uint i = tid; i < p.NE; i += 64u) {
            if (taken[i] == 0u && better(prob[i], i, bv, bi)) {
                bv = prob[i];
                bi = i;
            }
        }
        redV[tid] = bv;
        redI[tid] = bi;
        barrier();
        for (uint s = 32u; s > 0u; s >>= 1) {
            if (tid < s && better(redV[tid + s], redI[tid + s], redV[tid], redI[tid])) {
                redV[tid] = redV[tid + s];
                redI[tid] = redI[tid + s];
            }
            barrier();
        }
        if (tid == 0u) {
            sel[j] = redI[0];
            taken[redI[0]] = 1u;
        }
        barrier();
    }
    if (tid != 0u) return;
    float wv[64];
    for (uint j = 0u; j < p.USED; j++) wv[j] = prob[sel[j]];
    if (p.gating == 3u) {
        float mx = wv[0];
        for (uint j = 1u; j < p.USED; j++) mx = max(mx, wv[j]);
        float sum = 0.0;
        for (uint j = 0u; j < p.USED; j++) {
            precise float d = wv[j] - mx;
            wv[j] = expExact(d);
            sum += wv[j];
        }
        float inv = divExact(1.0, sum);
        for (uint j = 0u; j < p.USED; j++) {
            precise float v = wv[j] * inv;
            wv[j] = v;
        }
    }
    if (p.norm != 0u) {
        float sum = 0.0;
        for (uint j = 0u; j < p.USED; j++) sum += wv[j];
        float total = max(sum, 6.103515625e-5);
        for (uint j = 0u; j < p.USED; j++) wv[j] = divExact(wv[j], total);
    }
    for (uint j = 0u; j < p.USED; j++) {
        precise float v = p.scale == 1.0 ? wv[j] : wv[j] * p.scale;
        ids[t * p.USED + j] = sel[j];
        wts[t * p.USED + j] = v;
    }
}
