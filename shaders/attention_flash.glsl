// attention_flash: the fast tier's causal attention over the f16 KV cache, split over
// positions like attention_split (the same grid and partials, so attention_merge and
// quantize_x8's merge read either; one push constant more, minRange), with each position
// handled by eight lanes at once.
//
// Query token t sits at position pos[0]+t and attends to cache rows 0..pos[0]+t; those
// n = pos[0]+t+1 positions are cut into ranges of max(ceil(n/nSplit), minRange), the nonempty
// ones first (early in a context most of the nSplit ranges are empty, and the merge stops at
// the first of them). One workgroup (x: head group, y: token, z: range) takes one range for
// the hp query heads that share one KV head. Its 128 threads form 16 position groups of 8
// lanes (lanes of one subgroup); group g takes positions start+g, start+g+16, ...: each lane
// reads KPL 16-byte words of the K row and of the V row (8 halves each, word c = lane + 8k), the 8 lanes sum the hp scores with subgroup
// shuffles, and the group keeps its own running maximum M, sum S = Σ exp(score - M) and
// unnormalized output Σ exp(score - M)·v in registers: no barrier inside the loop over
// positions, every K and V byte read once by 16-byte loads of neighbouring lanes. The groups
// then combine (shuffles within a subgroup, shared memory across subgroups, rescaled to the
// workgroup's maximum) and write per head M, S and the output as attention_split does. Plain
// f32 scores, exponentials and sums.
//
// Variants: MAXHP (most heads a workgroup takes: 4 or 8) and KPL (16-byte words per lane and
// row: headDim <= 64·KPL). headDim is a multiple of 8, at most 256; hp·headDim <= 1024; the
// subgroup size is 8..128 (whole 8-lane groups, at most 16 subgroups).
//
// FRESH_KV (attention_flash_rn_*: a decode step of qwen3's per-head-normed attention, M = 1):
// the step's queries, key and value arrive as the products left them, and the workgroup does
// rope_kv_norm's work for what it reads, so that stage and its barrier go. It normalizes its
// hp query heads in shared memory (x·scale·g, scale = 1/sqrt(mean(x²) + eps), plain f32) and
// rotates them; the workgroup whose range holds the token's own position normalizes and rotates
// the token's key head the same way, rounds key and value to f16 (roundHalf) and reads that
// row from shared memory instead of the cache; the first of a KV head's workgroups among those
// also stores the row in the caches at pos[0] for the later steps. The sums of squares run in
// another order than rope_kv_norm's, so results agree to f32 rounding, not bit for bit.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef FRESH_KV
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { uvec4 kc4[]; };
layout(std430, binding = 2) readonly buffer Vb { uvec4 vc4[]; };
layout(std430, binding = 3) writeonly buffer Tb { float part[]; };
layout(std430, binding = 4) readonly buffer Pb { uint pos[]; };
#ifdef FRESH_KV
layout(std430, binding = 5) readonly buffer KRb { float kRaw[]; }; // the step's key product (nKV heads)
layout(std430, binding = 6) readonly buffer VRb { float vRaw[]; }; // its value product
layout(std430, binding = 7) readonly buffer Cb { float cs[]; };    // the step's (cos, sin) pairs
layout(std430, binding = 8) readonly buffer QNb { float qn[]; };   // the query heads' norm weight
layout(std430, binding = 9) readonly buffer KNb { float kn[]; };   // the key heads'
// the caches again (bindings 1 and 2 are the same buffers), for the store of the step's row:
// no workgroup of this dispatch reads that row from them, so the reads stay read-only loads
layout(std430, binding = 10) writeonly buffer KWb { uint kcw[]; };
layout(std430, binding = 11) writeonly buffer VWb { uint vcw[]; };
#endif
layout(push_constant) uniform P {
    uint headDim; uint nHead; uint nKV; uint M; uint qStride; float scale; uint nSplit; uint hp;
    uint minRange; // the shortest range: a short context fills fewer ranges, and the merge reads fewer
#ifdef FRESH_KV
    uint ropeDim; uint neox; float eps;
#endif
} p;

const uint LANES = 8u;            // lanes per position
const uint GROUPS = 128u / LANES; // position groups per workgroup
const uint ACC = MAXHP * KPL * 2u; // vec4 accumulators per lane
const float NEG_INF = -1.0 / 0.0;

shared float qs[1024];            // the hp queries, head-major
shared float redM[16u * MAXHP];   // per subgroup and head: the subgroup's maximum
shared float redS[16u * MAXHP];   // ... and its sum
shared float redA[4096];          // per subgroup: a round of heads' outputs

#ifdef FRESH_KV
#include "exact.glsl" // roundHalf
#include "rope_pair.glsl"
const uint QPT = (MAXHP * KPL * 64u + 127u) / 128u; // query elements a thread rotates
shared float kh[256];              // the token's key head, normalized
shared uvec4 kNew4[32], vNew4[32]; // the token's key and value rows of this KV head, f16 pairs
shared float normSS[16u * (MAXHP + 1u)]; // per subgroup: each query head's sum of squares, then the key's

// ropeIndex is the rotation pair of element j (< ropeDim) of a head.
uint ropeIndex(uint j) {
    uint half_ = p.ropeDim / 2u;
    return p.neox != 0u ? (j < half_ ? j : j - half_) : j / 2u;
}

// ropeRot is element j of a normalized head (its element j x, its pair's other element y)
// rotated by cs = (cos, sin), as rope_rotate.glsl rotates it.
float ropeRot(uint j, float x, float y, vec2 cs2) {
    bool first = p.neox != 0u ? j < p.ropeDim / 2u : (j & 1u) == 0u;
    vec2 rot = first ? ropePair(x, y, cs2.x, cs2.y) : ropePair(y, x, cs2.x, cs2.y);
    return first ? rot.x : rot.y;
}

// partner is the other element of j's rotation pair.
uint partner(uint j) {
    uint half_ = p.ropeDim / 2u;
    if (p.neox != 0u) return j < half_ ? j + half_ : j - half_;
    return j ^ 1u;
}

// rotatedQ is element j of the normalized query head in qs at base, rotated by cs2.
float rotatedQ(uint base, uint j, vec2 cs2) {
    if (j >= p.ropeDim) return qs[base + j];
    return ropeRot(j, qs[base + j], qs[base + partner(j)], cs2);
}

// rotatedK is element j of the normalized key head in kh, rotated by cs2.
float rotatedK(uint j, vec2 cs2) {
    if (j >= p.ropeDim) return kh[j];
    return ropeRot(j, kh[j], kh[partner(j)], cs2);
}
#endif

// rescale is exp(m - mAll), 0 for an empty part (m = -inf).
float rescale(float m, float mAll) {
    return m == NEG_INF ? 0.0 : exp(m - mAll);
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint sgLane = gl_SubgroupInvocationID;
    uint lane = sgLane % LANES;
    uint grp = gl_SubgroupID * (gl_SubgroupSize / LANES) + sgLane / LANES;
    uint group = p.nHead / p.nKV;
    uint perKV = group / p.hp;
    uint kvh = gl_WorkGroupID.x / perKV;
    uint h0 = kvh * group + (gl_WorkGroupID.x % perKV) * p.hp;
    uint t = gl_WorkGroupID.y, s = gl_WorkGroupID.z;
    uint hp = p.hp, hd = p.headDim, hd8 = hd / 8u;
    uint n = pos[0] + t + 1u;
    uint L = max((n + p.nSplit - 1u) / p.nSplit, p.minRange);
    uint start = min(n, s * L), end = min(n, start + L);
    uint stride = hd + 2u;
    if (start == end) { // an empty range (uniform over the workgroup): M = -inf, S = 0
        if (tid < hp) {
            uint base = ((t * p.nHead + h0 + tid) * p.nSplit + s) * stride;
            part[base] = NEG_INF;
            part[base + 1u] = 0.0;
        }
        return;
    }

#ifndef FRESH_KV
    for (uint i = tid; i < hp * hd; i += 128u) {
        uint hh = i / hd, d = i % hd;
        qs[i] = q[t * p.qStride + (h0 + hh) * hd + d];
    }
#else
    uint p0 = pos[0]; // M = 1: the token's own position, the range's last when this range holds it
    bool holdsNew = start <= p0 && p0 < end; // uniform over the workgroup
    // every global load first, so their latencies overlap: this thread's query elements
    // tid + 128c with their norm weights and rotation pairs, and (holdsNew) the key and value
    // pair 2·tid, 2·tid + 1 with theirs
    float xq[QPT], gq[QPT];
    vec2 csq[QPT];
    [[unroll]] for (uint c = 0u; c < QPT; c++) {
        uint i = tid + 128u * c, j = i % hd;
        bool has = i < hp * hd;
        xq[c] = has ? q[t * p.qStride + h0 * hd + i] : 0.0;
        gq[c] = has ? qn[j] : 0.0;
        csq[c] = has && j < p.ropeDim ? vec2(cs[2u * ropeIndex(j)], cs[2u * ropeIndex(j) + 1u]) : vec2(1.0, 0.0);
    }
    uint e = 2u * tid;
    bool ownsPair = holdsNew && e < hd;
    vec2 xk = vec2(0.0), gk = vec2(0.0), xv = vec2(0.0);
    vec4 csk = vec4(1.0, 0.0, 1.0, 0.0);
    if (ownsPair) {
        xk = vec2(kRaw[kvh * hd + e], kRaw[kvh * hd + e + 1u]);
        xv = vec2(vRaw[kvh * hd + e], vRaw[kvh * hd + e + 1u]);
        gk = vec2(kn[e], kn[e + 1u]);
        if (e < p.ropeDim) csk.xy = vec2(cs[2u * ropeIndex(e)], cs[2u * ropeIndex(e) + 1u]);
        if (e + 1u < p.ropeDim) csk.zw = vec2(cs[2u * ropeIndex(e + 1u)], cs[2u * ropeIndex(e + 1u) + 1u]);
    }
    {
        float ss[MAXHP + 1u];
        [[unroll]] for (uint hh = 0u; hh <= MAXHP; hh++) ss[hh] = 0.0;
        [[unroll]] for (uint c = 0u; c < QPT; c++) {
            uint head = (tid + 128u * c) / hd;
            [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) if (hh == head) ss[hh] += xq[c] * xq[c];
        }
        ss[MAXHP] = xk.x * xk.x + xk.y * xk.y;
        [[unroll]] for (uint hh = 0u; hh <= MAXHP; hh++) {
            float sum = subgroupAdd(ss[hh]);
            if (subgroupElect()) normSS[gl_SubgroupID * (MAXHP + 1u) + hh] = sum;
        }
    }
    barrier();
    {
        float sc[MAXHP + 1u]; // each head's scale, the subgroups' sums added in order
        [[unroll]] for (uint hh = 0u; hh <= MAXHP; hh++) {
            float total = 0.0;
            for (uint g = 0u; g < gl_NumSubgroups; g++) total += normSS[g * (MAXHP + 1u) + hh];
            sc[hh] = inversesqrt(total / float(hd) + p.eps);
        }
        [[unroll]] for (uint c = 0u; c < QPT; c++) {
            uint i = tid + 128u * c, head = i / hd;
            float f = sc[0];
            [[unroll]] for (uint hh = 1u; hh < MAXHP; hh++) if (hh == head) f = sc[hh];
            if (i < hp * hd) qs[i] = xq[c] * f * gq[c];
        }
        if (ownsPair) {
            kh[e] = xk.x * sc[MAXHP] * gk.x;
            kh[e + 1u] = xk.y * sc[MAXHP] * gk.y;
        }
    }
    barrier();
    float rq[QPT];
    [[unroll]] for (uint c = 0u; c < QPT; c++) {
        uint i = tid + 128u * c;
        rq[c] = i < hp * hd ? rotatedQ((i / hd) * hd, i % hd, csq[c]) : 0.0;
    }
    if (ownsPair) {
        uint kw2 = packHalf2x16(vec2(roundHalf(rotatedK(e, csk.xy)), roundHalf(rotatedK(e + 1u, csk.zw))));
        uint vw2 = packHalf2x16(vec2(roundHalf(xv.x), roundHalf(xv.y)));
        kNew4[e / 8u][(e / 2u) % 4u] = kw2;
        vNew4[e / 8u][(e / 2u) % 4u] = vw2;
        if (gl_WorkGroupID.x % perKV == 0u) { // one workgroup a KV head stores the row
            uint at = (p0 * p.nKV * hd + kvh * hd + e) / 2u;
            kcw[at] = kw2;
            vcw[at] = vw2;
        }
    }
    barrier();
    [[unroll]] for (uint c = 0u; c < QPT; c++) {
        uint i = tid + 128u * c;
        if (i < hp * hd) qs[i] = rq[c];
    }
#endif
    barrier();

    float Mx[MAXHP], S[MAXHP];
    vec4 acc[ACC]; // [head][word][half]
    [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) { Mx[hh] = NEG_INF; S[hh] = 0.0; }
    [[unroll]] for (uint a = 0u; a < ACC; a++) acc[a] = vec4(0.0);

    uint row8 = p.nKV * hd8;   // 16-byte words per cache row
    uint head8 = kvh * hd8;    // this KV head's first word in a row
    uint steps = (end - start + GROUPS - 1u) / GROUPS;
    for (uint i = 0u; i < steps; i++) { // uniform trip count: shuffles see every lane
        uint j = start + i * GROUPS + grp;
        bool valid = j < end;
        uvec4 kw[KPL], vw[KPL];
        [[unroll]] for (uint k = 0u; k < KPL; k++) {
            uint c = lane + LANES * k;
            bool has = valid && c < hd8;
#ifdef FRESH_KV
            bool fresh = j == p0; // the token's own row: this workgroup's copy, not the cache's
            kw[k] = has && !fresh ? kc4[j * row8 + head8 + c] : uvec4(0u);
            vw[k] = has && !fresh ? vc4[j * row8 + head8 + c] : uvec4(0u);
            if (has && fresh) { kw[k] = kNew4[c]; vw[k] = vNew4[c]; }
#else
            kw[k] = has ? kc4[j * row8 + head8 + c] : uvec4(0u);
            vw[k] = has ? vc4[j * row8 + head8 + c] : uvec4(0u);
#endif
        }
        float sv[MAXHP];
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
            sv[hh] = 0.0;
            if (hh < hp) {
                [[unroll]] for (uint k = 0u; k < KPL; k++) {
                    uint c = lane + LANES * k;
                    if (c < hd8) {
                        uint qo = hh * hd + 8u * c;
                        vec4 ka = vec4(unpackHalf2x16(kw[k].x), unpackHalf2x16(kw[k].y));
                        vec4 kb = vec4(unpackHalf2x16(kw[k].z), unpackHalf2x16(kw[k].w));
                        sv[hh] += dot(ka, vec4(qs[qo], qs[qo + 1u], qs[qo + 2u], qs[qo + 3u])) +
                                  dot(kb, vec4(qs[qo + 4u], qs[qo + 5u], qs[qo + 6u], qs[qo + 7u]));
                    }
                }
            }
        }
        [[unroll]] for (uint off = 1u; off < LANES; off <<= 1u) {
            [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
                if (hh < hp) sv[hh] += subgroupShuffleXor(sv[hh], off);
            }
        }
        vec4 va[KPL], vb[KPL]; // the V words unpacked once for every head
        [[unroll]] for (uint k = 0u; k < KPL; k++) {
            va[k] = vec4(unpackHalf2x16(vw[k].x), unpackHalf2x16(vw[k].y));
            vb[k] = vec4(unpackHalf2x16(vw[k].z), unpackHalf2x16(vw[k].w));
        }
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
            if (hh < hp && valid) {
                float sc = sv[hh] * p.scale;
                float mNew = max(Mx[hh], sc);
                float f = rescale(Mx[hh], mNew);
                float w = exp(sc - mNew);
                S[hh] = S[hh] * f + w;
                Mx[hh] = mNew;
                [[unroll]] for (uint k = 0u; k < KPL; k++) {
                    uint a = (hh * KPL + k) * 2u;
                    acc[a] = acc[a] * f + w * va[k];
                    acc[a + 1u] = acc[a + 1u] * f + w * vb[k];
                }
            }
        }
    }

    // combine the position groups of a subgroup (lanes 8 apart hold the same words)
    for (uint off = LANES; off < gl_SubgroupSize; off <<= 1u) {
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
            if (hh < hp) {
                float mo = subgroupShuffleXor(Mx[hh], off);
                float so = subgroupShuffleXor(S[hh], off);
                float mAll = max(Mx[hh], mo);
                float fa = rescale(Mx[hh], mAll), fb = rescale(mo, mAll);
                S[hh] = S[hh] * fa + so * fb;
                Mx[hh] = mAll;
                [[unroll]] for (uint a = hh * KPL * 2u; a < (hh + 1u) * KPL * 2u; a++) {
                    vec4 ao = subgroupShuffleXor(acc[a], off);
                    acc[a] = acc[a] * fa + ao * fb;
                }
            }
        }
    }
    // then the subgroups, rescaled to the workgroup's maximum
    uint sg = gl_SubgroupID, nsg = gl_NumSubgroups;
    if (sgLane == 0u) {
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
            if (hh < hp) { redM[sg * MAXHP + hh] = Mx[hh]; redS[sg * MAXHP + hh] = S[hh]; }
        }
    }
    barrier();
    float own[MAXHP]; // this subgroup's rescale to the workgroup maximum, per head
    [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
        own[hh] = 0.0;
        if (hh < hp) {
            float mAll = NEG_INF;
            for (uint g = 0u; g < nsg; g++) mAll = max(mAll, redM[g * MAXHP + hh]);
            own[hh] = rescale(Mx[hh], mAll);
            if (tid == hh) {
                float sum = 0.0;
                for (uint g = 0u; g < nsg; g++) sum += redS[g * MAXHP + hh] * rescale(redM[g * MAXHP + hh], mAll);
                uint base = ((t * p.nHead + h0 + hh) * p.nSplit + s) * stride;
                part[base] = mAll;
                part[base + 1u] = sum;
            }
        }
    }
    uint hpr = min(hp, max(1u, 4096u / (nsg * hd))); // heads per round of redA
    for (uint r0 = 0u; r0 < hp; r0 += hpr) {
        if (sgLane < LANES) {
            [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
                if (hh >= r0 && hh < min(r0 + hpr, hp)) {
                    [[unroll]] for (uint k = 0u; k < KPL; k++) {
                        uint c = lane + LANES * k;
                        if (c < hd8) {
                            uint a = (hh * KPL + k) * 2u;
                            uint o = (sg * hpr + hh - r0) * hd + 8u * c;
                            vec4 x = acc[a] * own[hh], y = acc[a + 1u] * own[hh];
                            redA[o] = x.x; redA[o + 1u] = x.y; redA[o + 2u] = x.z; redA[o + 3u] = x.w;
                            redA[o + 4u] = y.x; redA[o + 5u] = y.y; redA[o + 6u] = y.z; redA[o + 7u] = y.w;
                        }
                    }
                }
            }
        }
        barrier();
        uint heads = min(hpr, hp - r0);
        for (uint i = tid; i < heads * hd; i += 128u) {
            uint hr = i / hd, d = i % hd;
            float sum = 0.0;
            for (uint g = 0u; g < nsg; g++) sum += redA[(g * hpr + hr) * hd + d];
            uint base = ((t * p.nHead + h0 + r0 + hr) * p.nSplit + s) * stride;
            part[base + 2u + d] = sum;
        }
        barrier(); // redA is rewritten by the next round
    }
}
