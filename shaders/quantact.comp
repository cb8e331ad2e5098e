#version 450
// quantact: rounds activations the way llama.cpp's CPU dot products see them, so logits agree
// with it for quantized weights. Y (same layout as X) gets, per token row of K elements:
//   mode 1 (F16 weights): each value rounded to f16 (ties to even);
//   mode 2 (Q4_0/Q5_0/Q8_0 → Q8_0, Q4_1/Q5_1 → Q8_1): per 32-block d = f16(amax/127),
//          q = roundEven(x·127/amax), y = q·d;
//   mode 3 (K-quants → Q8_K): per 256-block with max the signed element of largest
//          magnitude, iscale = -127/max, q = min(127, roundEven(iscale·x)), y = q/iscale.
// One thread per block (mode 2/3) or per element (mode 1).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint K; uint M; uint stride; uint mode; } p;

#include "exact.glsl" // roundHalf, divExact: the CPU's f16 rounding and IEEE division

void main() {
    uint idx = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (p.mode == 1u) {
        if (idx >= p.K * p.M) return;
        uint t = idx / p.K, i = t * p.stride + idx % p.K;
        y[i] = roundHalf(x[i]);
        return;
    }
    uint B = p.mode == 2u ? 32u : 256u;
    uint perRow = p.K / B;
    if (idx >= perRow * p.M) return;
    uint t = idx / perRow;
    uint base = t * p.stride + (idx % perRow) * B;
    float amax = 0.0, maxv = 0.0;
    for (uint i = 0u; i < B; i++) {
        float v = x[base + i];
        if (abs(v) > amax) { amax = abs(v); maxv = v; }
    }
    if (p.mode == 2u) {
        float d = roundHalf(divExact(amax, 127.0));
        float id = amax != 0.0 ? divExact(127.0, amax) : 0.0;
        for (uint i = 0u; i < B; i++) y[base + i] = roundEven(x[base + i] * id) * d;
    } else {
        if (amax == 0.0) {
            for (uint i = 0u; i < B; i++) y[base + i] = 0.0;
            return;
        }
        float iscale = divExact(-127.0, maxv);
        float d = divExact(1.0, iscale);
        for (uint i = 0u; i < B; i++) y[base + i] = min(127.0, roundEven(iscale * x[base + i])) * d;
    }
}
