#version 450
// argmax: out[0] = the index of the largest X[i], i < n (the lowest index on ties).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) writeonly buffer Ob { uint o[]; };
layout(push_constant) uniform P { uint n; } p;
shared float bv[256];
shared uint bi[256];
void main() {
    uint tid = gl_LocalInvocationID.x;
    float best = -1.0 / 0.0;
    uint idx = 0xffffffffu;
    for (uint i = tid; i < p.n; i += 256u) {
        float v = x[i];
        if (v > best || idx == 0xffffffffu) { best = v; idx = i; }
    }
    bv[tid] = best; bi[tid] = idx;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (tid < s) {
            float v = bv[tid + s]; uint j = bi[tid + s];
            if (j != 0xffffffffu && (bi[tid] == 0xffffffffu || v > bv[tid] || (v == bv[tid] && j < bi[tid]))) {
                bv[tid] = v; bi[tid] = j;
            }
        }
        barrier();
    }
    if (tid == 0u) o[0] = bi[0];
}
