#version 450
// attention_merge: combines attention_split's per-range partials of one (head, token) into the
// attention output: with M* the largest range maximum, o = Σ_s exp(M_s - M*)·acc_s / Σ_s
// exp(M_s - M*)·S_s. Empty ranges carry S = 0 and M = -inf and drop out. One workgroup per
// (head, token); threads stride over the output dimensions.
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Tb { float part[]; };
layout(std430, binding = 1) writeonly buffer Ob { float o[]; };
layout(push_constant) uniform P { uint headDim; uint nHead; uint M; uint oStride; uint nSplit; } p;

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    if (h >= p.nHead || t >= p.M) return;
    uint stride = p.headDim + 2u;
    uint base = (t * p.nHead + h) * p.nSplit * stride;
    float mx = -1.0 / 0.0;
    for (uint s = 0u; s < p.nSplit; s++) {
        if (part[base + s * stride + 1u] > 0.0) mx = max(mx, part[base + s * stride]);
    }
    float tot = 0.0;
    for (uint s = 0u; s < p.nSplit; s++) {
        float S = part[base + s * stride + 1u];
        if (S > 0.0) tot += exp(part[base + s * stride] - mx) * S;
    }
    float inv = tot > 0.0 ? 1.0 / tot : 0.0;
    for (uint d = gl_LocalInvocationID.x; d < p.headDim; d += 128u) {
        float acc = 0.0;
        for (uint s = 0u; s < p.nSplit; s++) {
            uint b = base + s * stride;
            if (part[b + 1u] > 0.0) acc += exp(part[b] - mx) * part[b + 2u + d];
        }
        o[t * p.oStride + h * p.headDim + d] = acc * inv;
    }
}
