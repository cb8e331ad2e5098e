#version 450
// argmax_wide: out[0] = the index of the largest X[i], i < n (the lowest index on ties), over
// many workgroups: workgroup g scans elements g·chunk .. (g+1)·chunk - 1, each thread issuing
// its loads UNROLL at a time before comparing them in index order, and writes its best
// (value, index) to part[g]; the last workgroup to finish (counted in arrivals, which it
// resets) combines the parts. A decode step's greedy token: argmax.comp's one workgroup read a
// 248k-token vocabulary's logits 970 loads a thread in series (~0.3-0.5 ms a token on the
// H200, from host-visible memory).
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) writeonly buffer Ob { uint o[]; };
layout(std430, binding = 2) coherent buffer Pb { uvec2 part[]; }; // a workgroup's (value bits, index)
layout(std430, binding = 3) coherent buffer Cb { uint arrivals[]; };
layout(push_constant) uniform P { uint n; uint chunk; } p;

const uint NONE = 0xffffffffu;
const uint UNROLL = 8u;
shared float bv[256];
shared uint bi[256];
#include "last_arrival.glsl"

// beats reports whether candidate (v, j) replaces (b, bj): a candidate over none, a larger
// value, or an equal one at a lower index.
bool beats(float v, uint j, float b, uint bj) {
    return j != NONE && (bj == NONE || v > b || (v == b && j < bj));
}

// reduceWorkgroup leaves the workgroup's best of every thread's (best, idx) in bv[0], bi[0].
void reduceWorkgroup(uint tid, float best, uint idx) {
    bv[tid] = best;
    bi[tid] = idx;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (tid < s && beats(bv[tid + s], bi[tid + s], bv[tid], bi[tid])) {
            bv[tid] = bv[tid + s];
            bi[tid] = bi[tid + s];
        }
        barrier();
    }
}

void main() {
    uint tid = gl_LocalInvocationID.x, g = gl_WorkGroupID.x;
    uint start = g * p.chunk, end = min(start + p.chunk, p.n);
    float best = -1.0 / 0.0;
    uint idx = NONE;
    for (uint i0 = start + tid; i0 < end; i0 += 256u * UNROLL) {
        float v[UNROLL];
        [[unroll]] for (uint k = 0u; k < UNROLL; k++) {
            uint i = i0 + 256u * k;
            v[k] = i < end ? x[i] : 0.0;
        }
        [[unroll]] for (uint k = 0u; k < UNROLL; k++) {
            uint i = i0 + 256u * k;
            if (i < end && (v[k] > best || idx == NONE)) {
                best = v[k];
                idx = i;
            }
        }
    }
    reduceWorkgroup(tid, best, idx);
    if (tid == 0u) part[g] = uvec2(floatBitsToUint(bv[0]), bi[0]);
    if (!lastToArrive(0u, gl_NumWorkGroups.x)) return; // uniform: every workgroup's part is written
    best = -1.0 / 0.0;
    idx = NONE;
    for (uint k = tid; k < gl_NumWorkGroups.x; k += 256u) { // ascending: the lower index's part first
        uvec2 pk = part[k];
        float v = uintBitsToFloat(pk.x);
        if (beats(v, pk.y, best, idx)) {
            best = v;
            idx = pk.y;
        }
    }
    reduceWorkgroup(tid, best, idx);
    if (tid == 0u) {
        o[0] = bi[0];
    }
    arrivalDone(0u); // for the next token
}
