#version 450
// ssm_gates: the Gated DeltaNet's per-token, per-value-head gates, in place, as engine/cpu's
// deltaNet computes them: beta = sigmoid(beta) = 1 / (1 + e^-beta), and the log-decay
// g = softplus(alpha + dt_bias) · A (A = -exp(A_log) < 0; softplus(x) = ln(1 + e^x), x itself
// above 20). exp and the division are correctly rounded; ln is the implementation's (its
// absolute error under 2^-21 on [1, 2] moves the decay e^g by a few ulp at most).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Bb { float beta[]; };          // M × VH
layout(std430, binding = 1) buffer Ab { float alpha[]; };         // M × VH: alpha in, g out
layout(std430, binding = 2) readonly buffer Db { float dtBias[]; }; // VH
layout(std430, binding = 3) readonly buffer Rb { float a[]; };      // VH
layout(push_constant) uniform P { uint n; uint VH; } p;
#include "exact.glsl"

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (i >= p.n) return;
    uint h = i % p.VH;
    precise float eb = 1.0 + expExact(-beta[i]);
    beta[i] = divExact(1.0, eb);
    precise float x = alpha[i] + dtBias[h];
    float sp = x;
    if (!(x > 20.0)) {
        precise float u = 1.0 + expExact(x);
        sp = log(u);
    }
    precise float g = sp * a[h];
    alpha[i] = g;
}
