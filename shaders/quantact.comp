#version 450
// quantact: rounds activations the way llama.cpp's CPU dot products see them, so logits agree
// with it for quantized weights. Y (same layout as X) gets, per token row of K elements:
//   mode 1 (F16 weights): each value rounded to f16 (ties to even);
//   mode 4 (BF16 weights): each value rounded to bfloat16 (ties to even; a NaN stays a NaN);
//   mode 2 (Q4_0/Q5_0/Q8_0 → Q8_0, Q4_1/Q5_1 → Q8_1): per 32-block d = f16(amax/127),
//          q = roundEven(x·127/amax), y = q·d;
//   mode 3 (K-quants → Q8_K): per 256-block with max the signed element of largest
//          magnitude (the first one on ties), iscale = -127/max,
//          q = min(127, roundEven(iscale·x)), y = q/iscale.
// One thread per element: a workgroup covers 256 consecutive elements of X's rows taken end to
// end (K is a multiple of the block, so every block lies inside one row and one workgroup);
// the block maximum is a shared-memory reduction, so a decode step's row of 4096 activations
// runs on 4096 threads rather than on one thread per block.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint K; uint M; uint stride; uint mode; } p;

#include "exact.glsl" // roundHalf, divExact: the CPU's f16 rounding and IEEE division

shared float amS[256];
shared uint ixS[256];

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint idx = (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x) * 256u + tid;
    bool live = idx < p.K * p.M;
    uint i = live ? (idx / p.K) * p.stride + idx % p.K : 0u;
    float v = live ? x[i] : 0.0;
    if (p.mode == 1u) {
        if (live) y[i] = roundHalf(v);
        return;
    }
    if (p.mode == 4u) {
        uint b = floatBitsToUint(v);
        if (!isnan(v)) b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
        if (live) y[i] = uintBitsToFloat(b);
        return;
    }
    uint B = p.mode == 2u ? 32u : 256u;
    uint lo = tid & ~(B - 1u); // this block's first thread
    amS[tid] = abs(v);
    ixS[tid] = tid;
    barrier();
    for (uint s = B >> 1; s > 0u; s >>= 1) {
        if ((tid - lo) < s) {
            float a = amS[tid], b = amS[tid + s];
            if (b > a) { // a tie keeps the lower index: the first maximum, as the CPU's scan finds it
                amS[tid] = b;
                ixS[tid] = ixS[tid + s];
            }
        }
        barrier();
    }
    float amax = amS[lo];
    if (!live) return;
    if (p.mode == 2u) {
        float d = roundHalf(divExact(amax, 127.0));
        float id = amax != 0.0 ? divExact(127.0, amax) : 0.0;
        int q = int(roundEven(v * id));
        y[i] = q == 0 ? 0.0 : float(q) * d; // the CPU's int8 0 decodes to +0
        return;
    }
    if (amax == 0.0) {
        y[i] = 0.0;
        return;
    }
    uint mi = idx - tid + ixS[lo]; // the element holding the signed maximum
    float maxv = x[(mi / p.K) * p.stride + mi % p.K];
    float iscale = divExact(-127.0, maxv);
    float d = divExact(1.0, iscale);
    int q = min(127, int(roundEven(iscale * v)));
    y[i] = q == 0 ? 0.0 : float(q) * d;
}
