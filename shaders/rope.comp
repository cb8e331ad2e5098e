#version 450
// rope: rotates pairs of each head of X[t] (in place) by the angles of token t's position:
// cs holds, per token and pair i < ropeDim/2, cos and sin, computed on the host with
// llama.cpp's float32 angle recurrence (a last-bit difference in an angle can flip how a later
// activation rounds to 8 bits). neox=0 pairs (2i, 2i+1); neox=1 pairs (i, i+ropeDim/2).
// Each product is rounded before the sum, as llama.cpp's CPU path does (no fused multiply-add).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Cb { float cs[]; };
layout(push_constant) uniform P {
    uint headDim; uint nHeads; uint M; uint ropeDim; uint neox; uint stride;
} p;
#include "rope_pair.glsl"

void main() {
    uint half_ = p.ropeDim / 2u;
    uint idx = gl_GlobalInvocationID.x;
    uint total = p.M * p.nHeads * half_;
    if (idx >= total) return;
    uint i = idx % half_;
    uint h = (idx / half_) % p.nHeads;
    uint t = idx / (half_ * p.nHeads);
    float c = cs[2u * (t * half_ + i)], s = cs[2u * (t * half_ + i) + 1u];
    uint base = t * p.stride + h * p.headDim;
    uint a = p.neox != 0u ? base + i : base + 2u * i;
    uint b = p.neox != 0u ? base + i + half_ : base + 2u * i + 1u;
    float x0 = x[a], x1 = x[b];
    vec2 rot = ropePair(x0, x1, c, s);
    x[a] = rot.x;
    x[b] = rot.y;
}
