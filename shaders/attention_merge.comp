#version 450
// attention_merge: combines attention_split's per-range partials of one (head, token) into the
// attention output: with M* the largest range maximum, o = Σ_s exp(M_s - M*)·acc_s / Σ_s
// exp(M_s - M*)·S_s. The ranges are filled in order and the first empty one (S = 0, M = -inf)
// ends them. One workgroup per (head, token); threads stride over the output dimensions. The
// sum over ranges runs in quantize_x8's merge order (F_MERGE), value for value: 4 interleaved
// lanes (lane l takes ranges l, l+4, ...) added in lane order at the end.
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Tb { float part[]; };
layout(std430, binding = 1) writeonly buffer Ob { float o[]; };
layout(push_constant) uniform P { uint headDim; uint nHead; uint M; uint oStride; uint nSplit; } p;

const uint LANES = 4u;

void main() {
    uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    if (h >= p.nHead || t >= p.M) return;
    uint stride = p.headDim + 2u;
    uint base = (t * p.nHead + h) * p.nSplit * stride;
    float mx = -1.0 / 0.0;
    uint ns = p.nSplit;
    for (uint s = 0u; s < p.nSplit; s++) {
        if (!(part[base + s * stride + 1u] > 0.0)) {
            ns = s;
            break;
        }
        mx = max(mx, part[base + s * stride]);
    }
    float tot = 0.0;
    for (uint s = 0u; s < ns; s++) tot += exp(part[base + s * stride] - mx) * part[base + s * stride + 1u];
    float inv = tot > 0.0 ? 1.0 / tot : 0.0;
    for (uint d = gl_LocalInvocationID.x; d < p.headDim; d += 128u) {
        float lane[LANES];
        for (uint l = 0u; l < LANES; l++) {
            lane[l] = 0.0;
            for (uint s = l; s < ns; s += LANES) {
                uint b = base + s * stride;
                lane[l] += exp(part[b] - mx) * part[b + 2u + d];
            }
        }
        float acc = lane[0];
        for (uint l = 1u; l < LANES; l++) acc += lane[l];
        o[t * p.oStride + h * p.headDim + d] = acc * inv;
    }
}
