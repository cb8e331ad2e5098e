#version 450
// rope_kv: one dispatch for what rope (on q and k) then kvstore (k and v) did in two stages:
// rotates m tokens' query heads in place and writes their keys, rotated, and their values into
// the f16 caches at rows pos[0].. . The arithmetic is rope.comp's and kvstore.comp's (each
// product rounded before the sum, no fused multiply-add; values rounded to f16 with roundHalf
// before packing), so both tiers keep their results to the last bit.
// Threads: first the query pairs (m·nHead·ropeDim/2), then the key words (m·kRow/2), then the
// value words (m·vRow/2).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) readonly buffer Cb { float cs[]; };
layout(std430, binding = 4) buffer KCb { uint kc[]; };
layout(std430, binding = 5) buffer VCb { uint vc[]; };
layout(std430, binding = 6) readonly buffer Pb { uint pos[]; };
layout(push_constant) uniform P {
    uint headDim; uint nHead; uint M; uint ropeDim; uint neox; uint qStride; uint kRow; uint vRow;
} p;
#include "exact.glsl" // roundHalf
#include "rope_pair.glsl"

// rotated returns element j (< headDim) of the key head starting at base, rotated for token t.
float rotated(uint base, uint j, uint t) {
    uint half_ = p.ropeDim / 2u;
    if (j >= p.ropeDim) return k[base + j];
    bool first; // the pair's first element (rot.x) or its second (rot.y)
    uint i, a, b;
    if (p.neox != 0u) {
        first = j < half_;
        i = first ? j : j - half_;
        a = base + i;
        b = base + i + half_;
    } else {
        first = (j & 1u) == 0u;
        i = j / 2u;
        a = base + 2u * i;
        b = a + 1u;
    }
    float c = cs[2u * (t * half_ + i)], s = cs[2u * (t * half_ + i) + 1u];
    float x0 = k[a], x1 = k[b];
    vec2 rot = ropePair(x0, x1, c, s);
    return first ? rot.x : rot.y;
}

void main() {
    uint half_ = p.ropeDim / 2u;
    uint idx = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint nq = p.M * p.nHead * half_, nk = p.M * p.kRow / 2u, nv = p.M * p.vRow / 2u;
    if (idx < nq) {
        uint i = idx % half_;
        uint h = (idx / half_) % p.nHead;
        uint t = idx / (half_ * p.nHead);
        float c = cs[2u * (t * half_ + i)], s = cs[2u * (t * half_ + i) + 1u];
        uint base = t * p.qStride + h * p.headDim;
        uint a = p.neox != 0u ? base + i : base + 2u * i;
        uint b = p.neox != 0u ? base + i + half_ : base + 2u * i + 1u;
        float x0 = q[a], x1 = q[b];
        vec2 rot = ropePair(x0, x1, c, s);
        q[a] = rot.x;
        q[b] = rot.y;
        return;
    }
    idx -= nq;
    if (idx < nk) {
        uint words = p.kRow / 2u;
        uint t = idx / words, e = 2u * (idx % words);
        uint h = e / p.headDim, j = e % p.headDim; // headDim is even: the pair stays in one head
        uint base = t * p.kRow + h * p.headDim;
        kc[((pos[0] + t) * p.kRow + e) / 2u] = packHalf2x16(vec2(roundHalf(rotated(base, j, t)), roundHalf(rotated(base, j + 1u, t))));
        return;
    }
    idx -= nk;
    if (idx < nv) {
        uint words = p.vRow / 2u;
        uint t = idx / words, e = 2u * (idx % words);
        uint s = t * p.vRow + e;
        vc[((pos[0] + t) * p.vRow + e) / 2u] = packHalf2x16(vec2(roundHalf(v[s]), roundHalf(v[s + 1u])));
    }
}
