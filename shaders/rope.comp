#version 450
// rope: rotates pairs of each head of X[t] (in place) by angle (pos0+t) * freqScale *
// base^(-2i/ropeDim) / factors[i] (factors only when hasFactors; llama 3.1 rope_freqs).
// neox=0 pairs (2i, 2i+1); neox=1 pairs (i, i+ropeDim/2). pos0 = pos[0].
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Xb { float x[]; };
layout(std430, binding = 1) readonly buffer Pb { uint pos[]; };
layout(std430, binding = 2) readonly buffer Fb { float factors[]; };
layout(push_constant) uniform P {
    uint headDim; uint nHeads; uint M; uint ropeDim; float freqBase; float freqScale; uint neox; uint stride; uint hasFactors;
} p;
const float TWO_PI = 6.283185307179586;
void main() {
    uint half_ = p.ropeDim / 2u;
    uint idx = gl_GlobalInvocationID.x;
    uint total = p.M * p.nHeads * half_;
    if (idx >= total) return;
    uint i = idx % half_;
    uint h = (idx / half_) % p.nHeads;
    uint t = idx / (half_ * p.nHeads);
    float theta = float(pos[0] + t) * p.freqScale * pow(p.freqBase, -2.0 * float(i) / float(p.ropeDim));
    if (p.hasFactors != 0u) theta /= factors[i];
    theta = mod(theta, TWO_PI);
    float c = cos(theta), s = sin(theta);
    uint base = t * p.stride + h * p.headDim;
    uint a = p.neox != 0u ? base + i : base + 2u * i;
    uint b = p.neox != 0u ? base + i + half_ : base + 2u * i + 1u;
    float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}
