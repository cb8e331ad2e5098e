#version 450
// attention_split: the fast tier's causal attention over the f16 KV cache, split over positions
// (flash decoding). Query token t sits at position pos[0]+t and attends to cache rows
// 0..pos[0]+t. The n = pos[0]+t+1 positions are cut into nSplit ranges of ceil(n/nSplit), the
// nonempty ones first (quantize_x8's merge stops at the first empty one); one
// workgroup takes one range for hp query heads that share one KV head (grouped-query
// attention reads each K and V row once for the whole group) and writes, per head, its
// partial result: the running maximum M of the scores, the sum S of exp(score - M) and the
// unnormalized output Σ exp(score - M)·v. attention_merge combines the ranges. Scores,
// exponentials and sums are plain f32 (no llama.cpp CPU rounding order: that is the exact
// tier's attention.comp). headDim is a multiple of 8 and at most 256; hp <= 8, hp·headDim <= 1024.
//
// Grid: x = nKV·(nHead/nKV)/hp head groups, y = tokens, z = nSplit ranges. 128 threads: in
// the score phase thread i scores position j0+i of a 128-position chunk against the hp
// queries; in the value phase each thread owns one output pair (two dimensions) of every head
// for a stride of the chunk's positions, so neighbouring threads read neighbouring V words.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { uvec4 kc4[]; };
layout(std430, binding = 2) readonly buffer Vb { uint vc[]; };
layout(std430, binding = 3) writeonly buffer Tb { float part[]; };
layout(std430, binding = 4) readonly buffer Pb { uint pos[]; };
layout(push_constant) uniform P {
    uint headDim; uint nHead; uint nKV; uint M; uint qStride; float scale; uint nSplit; uint hp;
} p;

const uint CHUNK = 128u;
const uint MAXHP = 8u;  // heads per workgroup at most (the host picks hp <= 8)
shared float qs[1024];           // the hp queries, head-major
shared float sc[MAXHP * CHUNK];  // per head: the chunk's scores, then their weights
shared float redS[MAXHP * 32u];  // per head and subgroup: reduction partials
shared vec2 accS[MAXHP * CHUNK]; // per head and thread: output pairs, for the final sum

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint group = p.nHead / p.nKV;
    uint perKV = group / p.hp;
    uint kvh = gl_WorkGroupID.x / perKV;
    uint h0 = kvh * group + (gl_WorkGroupID.x % perKV) * p.hp;
    uint t = gl_WorkGroupID.y, s = gl_WorkGroupID.z;
    uint hp = p.hp, hd = p.headDim, hd2 = hd / 2u, hd8 = hd / 8u;
    uint n = pos[0] + t + 1u;
    uint L = (n + p.nSplit - 1u) / p.nSplit;
    uint start = min(n, s * L), end = min(n, start + L);
    uint stride = hd + 2u;
    if (start == end) { // an empty range (uniform over the workgroup): M = -inf, S = 0
        if (tid < hp) {
            uint base = ((t * p.nHead + h0 + tid) * p.nSplit + s) * stride;
            part[base] = -1.0 / 0.0;
            part[base + 1u] = 0.0;
        }
        return;
    }

    for (uint i = tid; i < hp * hd; i += CHUNK) {
        uint hh = i / hd, d = i % hd;
        qs[i] = q[t * p.qStride + (h0 + hh) * hd + d];
    }
    barrier();

    uint kvRow8 = p.nKV * hd8;           // uvec4 per K row
    uint kvRow2 = p.nKV * hd2;           // words per V row
    uint pairs = hd2;                    // output pairs per head
    uint R = CHUNK / pairs;              // position strides in the value phase (>= 1)
    uint d2 = tid % pairs, grp = tid / pairs;
    bool owns = grp < R;                 // threads past R·pairs idle in the value phase

    float Mx[MAXHP], S[MAXHP];
    vec2 acc[MAXHP];
    [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) { Mx[hh] = -1.0 / 0.0; S[hh] = 0.0; acc[hh] = vec2(0.0); }

    for (uint j0 = start; j0 < end; j0 += CHUNK) {
        uint cnt = min(CHUNK, end - j0);
        uint j = j0 + tid;
        float sv[MAXHP];
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) sv[hh] = -1.0 / 0.0;
        if (tid < cnt) {
            uint kb = j * kvRow8 + kvh * hd8;
            [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) sv[hh] = 0.0;
            for (uint c = 0u; c < hd8; c++) {
                uvec4 kw = kc4[kb + c];
                vec2 k0 = unpackHalf2x16(kw.x), k1 = unpackHalf2x16(kw.y), k2 = unpackHalf2x16(kw.z), k3 = unpackHalf2x16(kw.w);
                vec4 ka = vec4(k0, k1), kb4 = vec4(k2, k3);
                [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
                    if (hh < hp) {
                        uint qo = hh * hd + 8u * c;
                        sv[hh] += dot(ka, vec4(qs[qo], qs[qo + 1u], qs[qo + 2u], qs[qo + 3u])) +
                                    dot(kb4, vec4(qs[qo + 4u], qs[qo + 5u], qs[qo + 6u], qs[qo + 7u]));
                    }
                }
            }
            [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) sv[hh] *= p.scale;
        }
        // the chunk's maximum per head: subgroup maxima, then over the subgroups
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
            if (hh < hp) {
                float m = subgroupMax(sv[hh]);
                if (subgroupElect()) redS[hh * 32u + gl_SubgroupID] = m;
            }
        }
        barrier();
        float mNew[MAXHP], f[MAXHP];
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
            mNew[hh] = Mx[hh];
            if (hh < hp) {
                for (uint g = 0u; g < gl_NumSubgroups; g++) mNew[hh] = max(mNew[hh], redS[hh * 32u + g]);
            }
            f[hh] = Mx[hh] == mNew[hh] ? 1.0 : exp(Mx[hh] - mNew[hh]); // -inf - finite: 0
        }
        barrier(); // everyone has read the maxima before redS takes the sums
        float e[MAXHP];
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
            e[hh] = 0.0;
            if (hh < hp) {
                e[hh] = tid < cnt ? exp(sv[hh] - mNew[hh]) : 0.0;
                sc[hh * CHUNK + tid] = e[hh];
                float sum = subgroupAdd(e[hh]);
                if (subgroupElect()) redS[hh * 32u + gl_SubgroupID] = sum;
            }
        }
        barrier();
        [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
            if (hh < hp) {
                float sum = 0.0;
                for (uint g = 0u; g < gl_NumSubgroups; g++) sum += redS[hh * 32u + g];
                S[hh] = S[hh] * f[hh] + sum;
                Mx[hh] = mNew[hh];
                acc[hh] *= f[hh];
            }
        }
        if (owns) {
            for (uint i = grp; i < cnt; i += R) {
                vec2 v = unpackHalf2x16(vc[(j0 + i) * kvRow2 + kvh * hd2 + d2]);
                [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
                    if (hh < hp) acc[hh] += sc[hh * CHUNK + i] * v;
                }
            }
        }
        barrier(); // sc and redS are rewritten by the next chunk
    }

    // sum the R position strides of each output pair, then write the partials
    [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) {
        if (hh < hp) accS[hh * CHUNK + tid] = owns ? acc[hh] : vec2(0.0);
    }
    barrier();
    for (uint i = tid; i < hp * pairs; i += CHUNK) {
        uint hh = i / pairs, dp = i % pairs;
        vec2 sum = vec2(0.0);
        for (uint g = 0u; g < R; g++) sum += accS[hh * CHUNK + g * pairs + dp];
        uint base = ((t * p.nHead + h0 + hh) * p.nSplit + s) * stride;
        part[base + 2u + 2u * dp] = sum.x;
        part[base + 3u + 2u * dp] = sum.y;
    }
    [[unroll]] for (uint hh = 0u; hh < MAXHP; hh++) { // head hh's M and S, from thread hh
        if (hh < hp && tid == hh) {
            uint base = ((t * p.nHead + h0 + hh) * p.nSplit + s) * stride;
            part[base] = Mx[hh];
            part[base + 1u] = S[hh];
        }
    }
}
