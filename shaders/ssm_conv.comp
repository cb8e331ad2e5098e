#version 450
// ssm_conv: the Gated DeltaNet's short causal convolution over its q, k and v channels, then
// SiLU, in place, as engine/cpu's deltaNet computes it. One thread per channel walks the window's
// M tokens in order: tap t of the channel's K taps multiplies the input K-1-t tokens back (the
// state holds each channel's last K-1 inputs, oldest first, and is updated as the window
// advances), each product rounded before the running sum (no fused multiply-add), then
// silu(s) = s / (1 + e^-s) with a correctly rounded exp and division.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Xb { float x[]; };          // M × C: the projection in, silu(conv) out
layout(std430, binding = 1) readonly buffer Wb { float w[]; }; // C × K taps, the oldest input's first
layout(std430, binding = 2) buffer Sb { float st[]; };         // (K-1) × C: the last K-1 inputs of every channel
layout(push_constant) uniform P { uint C; uint M; uint K; } p;
#include "exact.glsl"

const uint MAXK = 8u; // the host refuses longer kernels

void main() {
    uint c = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (c >= p.C) return;
    uint n = p.K - 1u;
    float hist[MAXK];
    for (uint t = 0u; t < n; t++) hist[t] = st[t * p.C + c];
    for (uint i = 0u; i < p.M; i++) {
        float in_ = x[i * p.C + c];
        precise float sum = 0.0;
        for (uint t = 0u; t < n; t++) {
            precise float pr = hist[t] * w[c * p.K + t];
            sum = sum + pr;
        }
        precise float last = in_ * w[c * p.K + n];
        sum = sum + last;
        for (uint t = 0u; t + 1u < n; t++) hist[t] = hist[t + 1u];
        hist[n - 1u] = in_;
        precise float e = 1.0 + expExact(-sum);
        x[i * p.C + c] = divExact(sum, e);
    }
    for (uint t = 0u; t < n; t++) st[t * p.C + c] = hist[t];
}
