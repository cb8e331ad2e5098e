#version 450
// moe_combine: the weighted sum of a mixture-of-experts layer's selected experts, plus its
// shared expert under a sigmoid gate, added to the residual, in engine/cpu's order (ggml's):
//   acc = O[t,0]·w[t,0];  acc += O[t,j]·w[t,j] for j = 1..USED-1 (each product rounded);
//   with a shared expert: acc += S[t]·sigmoid(g[t]),  sigmoid(v) = 1/(1 + exp(-v));
//   X[t] += acc.
// O holds each pair's expert output (row t·USED + j of DIM), w the router's weights, S the
// shared expert's output (M rows of DIM) and g its gate logit per token. One thread per (t, d).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Ob { float o[]; };
layout(std430, binding = 2) readonly buffer Wb { float wts[]; };
layout(std430, binding = 3) readonly buffer Sb { float sh[]; };
layout(std430, binding = 4) readonly buffer Gb { float g[]; };
layout(push_constant) uniform P { uint DIM; uint USED; uint M; uint hasShared; } p;
#include "exact.glsl" // expExact, divExact: the CPU's sigmoid
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (i >= p.DIM * p.M) return;
    uint t = i / p.DIM, d = i % p.DIM;
    uint q0 = t * p.USED;
    precise float acc = o[q0 * p.DIM + d] * wts[q0];
    for (uint j = 1u; j < p.USED; j++) {
        precise float pr = o[(q0 + j) * p.DIM + d] * wts[q0 + j];
        acc = acc + pr;
    }
    if (p.hasShared != 0u) {
        precise float den = 1.0 + expExact(-g[t]);
        float sg = divExact(1.0, den);
        precise float pr = sh[t * p.DIM + d] * sg;
        acc = acc + pr;
    }
    precise float r = x[i] + acc;
    x[i] = r;
}
