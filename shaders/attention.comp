#version 450
// attention: causal multi-head attention with grouped KV heads over an f16 KV cache.
// Query token t (position pos0+t, pos0 = pos[0]) and head h attend to cache rows 0..pos0+t
// of KV head h / (nHead/nKV). One workgroup per (head, token); keys are scored 64 at a time
// into shared memory and folded into an online softmax (running max and sum), so any
// context length runs in fixed shared memory. headDim <= 256 and even. Queries are rounded to
// f16 and the value sum is kept in f16, as llama.cpp's CPU path does, so greedy output agrees
// with it for quantized models; scores, exponentials and fused multiply-adds are rounded as
// there too (exact.glsl).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { uint kc[]; };
layout(std430, binding = 2) readonly buffer Vb { uint vc[]; };
layout(std430, binding = 3) writeonly buffer Ob { float o[]; };
layout(std430, binding = 4) readonly buffer Pb { uint pos[]; };
layout(push_constant) uniform P {
    uint headDim; uint nHead; uint nKV; uint M; uint qStride; uint oStride; float scale;
} p;
shared float qs[256];

#include "exact.glsl" // roundHalf: llama.cpp multiplies the f16 cache with f16-rounded queries

shared float sc[64];
shared float msS[64];
shared float vsS[64];
void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    if (h >= p.nHead || t >= p.M) return;
    uint tid = gl_LocalInvocationID.x;
    uint kvh = h / (p.nHead / p.nKV);
    uint kvRow = p.nKV * p.headDim;      // halves per cache row
    uint kvOff = kvh * p.headDim;
    uint hd2 = p.headDim / 2u;
    for (uint d = tid; d < p.headDim; d += 64u) qs[d] = roundHalf(q[t * p.qStride + h * p.headDim + d]);
    barrier();
    uint last = pos[0] + t;              // inclusive
    // Online softmax with the numerics of llama.cpp's CPU flash attention: positions are
    // folded one at a time, the weighted sum of values is kept in f16 (rounded after every
    // position) and the running sum with fused multiply-adds. Every thread walks the same
    // positions, so the running maximum M and sum S are identical across threads; thread tid
    // owns output dimensions tid, tid+64, ...
    float M = -1.0 / 0.0, S = 0.0;
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    for (uint j0 = 0u; j0 <= last; j0 += 64u) {
        uint j = j0 + tid;
        float s = -1.0 / 0.0;
        if (j <= last) {
            uint kb = (j * kvRow + kvOff) / 2u;
            // products of two f16 values are exact floats; their sum is kept exact in a
            // float pair (llama.cpp sums them in double) and rounded once
            float dh = 0.0, dl = 0.0;
            for (uint d = 0u; d < hd2; d++) {
                vec2 k = unpackHalf2x16(kc[kb + d]);
                precise float p0 = qs[2u * d] * k.x;
                precise float p1 = qs[2u * d + 1u] * k.y;
                float h, l;
                twoSum(dh, p0, h, l);
                dl += l;
                twoSum(h, p1, dh, l);
                dl += l;
            }
            precise float dot = dh + dl;
            precise float sd = dot * p.scale;
            s = sd;
        }
        sc[tid] = s;
        barrier();
        uint n = min(64u, last + 1u - j0);
        // Each thread takes one position's exponential (the running maximum before it is the
        // maximum of M and the chunk's earlier scores): a rescale ms when the score raises
        // the maximum, else the value weight vs.
        if (tid < n) {
            float prev = M;
            for (uint i = 0u; i < tid; i++) prev = max(prev, sc[i]);
            bool raises = s > prev;
            msS[tid] = raises ? expExact(prev - s) : 1.0;
            vsS[tid] = raises ? 1.0 : expExact(s - prev);
        }
        barrier();
        for (uint i = 0u; i < n; i++) {
            float si = sc[i];
            float ms = msS[i], vs = vsS[i];
            if (si > M) {
                if (j0 + i > 0u) {
                    for (uint a = 0u; a < 4u; a++) acc[a] = roundHalf(acc[a] * ms);
                }
                M = si;
            }
            uint vb = (j0 + i) * kvRow + kvOff;
            for (uint a = 0u; a < 4u; a++) {
                uint d = tid + 64u * a;
                if (d < p.headDim) {
                    vec2 vv = unpackHalf2x16(vc[(vb + d) / 2u]);
                    acc[a] = roundHalf(fmaExact(((vb + d) & 1u) == 0u ? vv.x : vv.y, vs, acc[a]));
                }
            }
            S = fmaExact(S, ms, vs);
        }
        barrier();
    }
    float inv = S != 0.0 ? divExact(1.0, S) : 0.0;
    for (uint a = 0u; a < 4u; a++) {
        uint d = tid + 64u * a;
        if (d < p.headDim) {
            precise float r = acc[a] * inv;
            o[t * p.oStride + h * p.headDim + d] = r;
        }
    }
}
