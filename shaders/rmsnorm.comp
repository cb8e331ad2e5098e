#version 450
// rmsnorm: Y[t][i] = X[t][i] / sqrt(mean_i(X[t]^2) + eps) * g[i]; one workgroup per token.
// The numerics are llama.cpp's CPU ones, so that quantized models round their next activations
// to 8 bits the same way: each square is rounded to float, the squares are summed exactly
// (as its double-precision sum is for any realistic row) in float-float pairs, the mean is the
// float nearest sum/n, scale = 1/sqrt(mean + eps) correctly rounded (no inversesqrt), and
// Y = (X·scale)·g with two roundings.
layout(local_size_x = 256) in; // many threads: a decode step normalizes one row, and its loads are latency-bound
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Gb { float g[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint n; uint M; uint stride; float eps; } p;
shared float hiS[256];
shared float loS[256];

#include "exact.glsl"

// addPair adds (bh, bl) to (ah, al), keeping the pair normalized.
void addPair(inout float ah, inout float al, float bh, float bl) {
    float s, e;
    twoSum(ah, bh, s, e);
    precise float l = e + (al + bl);
    twoSum(s, l, ah, al);
}

void main() {
    uint t = gl_WorkGroupID.x;
    if (t >= p.M) return;
    uint tid = gl_LocalInvocationID.x;
    uint base = t * p.stride;
    float hi = 0.0, lo = 0.0;
    for (uint i = tid; i < p.n; i += 256u) {
        precise float sq = x[base + i] * x[base + i];
        addPair(hi, lo, sq, 0.0);
    }
    hiS[tid] = hi;
    loS[tid] = lo;
    barrier();
    for (uint k = 128u; k > 0u; k >>= 1) {
        if (tid < k) {
            float h = hiS[tid], l = loS[tid];
            addPair(h, l, hiS[tid + k], loS[tid + k]);
            hiS[tid] = h;
            loS[tid] = l;
        }
        barrier();
    }
    // mean = the float nearest (hi + lo) / n: a correctly rounded quotient of hi, corrected by
    // the exact remainder and lo.
    float nf = float(p.n);
    float q = divExact(hiS[0], nf);
    precise float rem = fmaExact(-q, nf, hiS[0]) + loS[0]; // hi - q·n is exact
    precise float mean = q + divExact(rem, nf);
    precise float me = mean + p.eps;
    float scale = divExact(1.0, sqrtExact(me));
    for (uint i = tid; i < p.n; i += 256u) {
        precise float v = x[base + i] * scale;
        y[base + i] = v * g[i];
    }
}
