// rope_kv_norm.glsl (rope_kv_norm.comp, rope_kv_norm_gq.comp): rope_kv for layers whose queries and keys take a per-head RMSNorm before the
// rotation (qwen3, qwen3moe): each query and key head normalized as rmsnorm_fast normalizes a
// row (x·scale·g, scale = 1/sqrt(mean(x²) + eps), plain f32), then rotated and stored as
// rope_kv does (its arithmetic: each product rounded before the sum; keys and values rounded
// to f16 with roundHalf). One stage instead of the head norms' and rope_kv's two.
// Workgroups: one per query head (m·nHead), then one per key head (m·nKV), then the value
// words 64 a workgroup. A head's workgroup reads the head into shared memory, sums its squares
// (subgroup sums, then the subgroups in order), normalizes it in place and writes every
// element of it rotated (queries in place, keys into the cache row pos[0] + t).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) readonly buffer Cb { float cs[]; };
layout(std430, binding = 4) buffer KCb { uint kc[]; };
layout(std430, binding = 5) buffer VCb { uint vc[]; };
layout(std430, binding = 6) readonly buffer Pb { uint pos[]; };
layout(std430, binding = 7) readonly buffer QNb { float qn[]; }; // the query heads' norm weight
layout(std430, binding = 8) readonly buffer KNb { float kn[]; }; // the key heads'
#ifdef GATED_Q
// GATED_Q (rope_kv_norm_gq, the hybrids' gated attention): the queries are read from the gated
// query projection (each head's query then its gate, 2·headDim a head, M rows of 2·nHead
// heads' worth) and written to q, so no attn_qsplit stage copies them out first.
layout(std430, binding = 9) readonly buffer QGb { float qg[]; };
#endif
layout(push_constant) uniform P {
    uint headDim; uint nHead; uint M; uint ropeDim; uint neox; uint qStride; uint kRow; uint vRow; float eps;
} p;
#include "exact.glsl" // roundHalf

shared float hv[256]; // the head, normalized
shared float part[64];

#include "rope_rotate.glsl"

// rotated returns element j of the normalized head in hv rotated for token t (rope_kv's).
float rotated(uint j, uint t) { return ropeRotated(j, t, p.ropeDim, p.neox != 0u); }

void main() {
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint tid = gl_LocalInvocationID.x;
    uint hd = p.headDim, nKV = p.kRow / hd;
    uint nqh = p.M * p.nHead, nkh = p.M * nKV;
    if (wg < nqh + nkh) { // uniform: a head
        bool isQ = wg < nqh;
        uint w = isQ ? wg : wg - nqh;
        uint heads = isQ ? p.nHead : nKV;
        uint t = w / heads, h = w % heads;
        uint base = isQ ? t * p.qStride + h * hd : t * p.kRow + h * hd;
        float ss = 0.0;
        for (uint j = tid; j < hd; j += 64u) {
#ifdef GATED_Q
            float x = isQ ? qg[(t * p.nHead + h) * 2u * hd + j] : k[base + j];
#else
            float x = isQ ? q[base + j] : k[base + j];
#endif
            hv[j] = x;
            ss += x * x;
        }
        ss = subgroupAdd(ss);
        if (subgroupElect()) part[gl_SubgroupID] = ss;
        barrier();
        float total = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; g++) total += part[g];
        float scale = inversesqrt(total / float(hd) + p.eps);
        for (uint j = tid; j < hd; j += 64u) hv[j] = hv[j] * scale * (isQ ? qn[j] : kn[j]);
        barrier();
        if (isQ) {
            for (uint j = tid; j < hd; j += 64u) q[base + j] = rotated(j, t);
        } else {
            for (uint e = 2u * tid; e < hd; e += 128u) {
                kc[((pos[0] + t) * p.kRow + h * hd + e) / 2u] = packHalf2x16(vec2(roundHalf(rotated(e, t)), roundHalf(rotated(e + 1u, t))));
            }
        }
        return;
    }
    uint idx = (wg - nqh - nkh) * 64u + tid;
    uint nv = p.M * p.vRow / 2u;
    if (idx < nv) {
        uint words = p.vRow / 2u;
        uint t = idx / words, e = 2u * (idx % words);
        uint s = t * p.vRow + e;
        vc[((pos[0] + t) * p.vRow + e) / 2u] = packHalf2x16(vec2(roundHalf(v[s]), roundHalf(v[s + 1u])));
    }
}
