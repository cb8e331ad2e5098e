// delta_rule_fast.glsl: the Gated DeltaNet's recurrence on the fast tier, included by
// delta_rule_fast_<S>.comp with S, the head size (state_size), defined. The same arithmetic as
// delta_rule.glsl in f32 with fused multiply-adds, four partial sums a dot product and the
// device's exp, sqrt and division, and one barrier a token instead of about sixteen: one
// workgroup per value head, one thread per row j of the head's S×S state (stored transposed:
// row j holds S[·][j]), the row in registers for the whole window. Per token:
//
//	‖q‖, ‖k‖, row j · k   each thread sums them itself over the token's raw q and k (no
//	                      reduction): l2norm(k)·x = k·(x / max(‖k‖, eps))
//	β, g  = sigmoid(β), softplus(α + dt_bias)·A   ssm_gates' gates, from the raw projections
//	row j = e^g row j + k · sk·β (v_j − e^g sk (row j · k)),  sk = 1 / max(‖k‖, eps)
//	o_j   = (row j · q) · sq / sqrt(S),  sq = 1 / max(‖q‖, eps)
//	out_j = rmsnorm(o)_j · w_j · silu(z_j)   (the head's sum of squares: a subgroup sum, the
//	                                         subgroups' partials in shared memory, the barrier)
//
// (so no ssm_gates stage before it). The token's q and k wait in shared memory, loaded by the
// first half of the threads while the previous token is folded in (two alternating copies; the
// token's barrier orders them), as do the norm's partials. Dot products end in another order than the CPU reference's: the kernel
// is held to a stated bound of a float64 reference (TestDeltaRuleMatchesFloat64Reference).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = S) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };     // M × C: q heads, k heads, v heads (after the conv)
layout(std430, binding = 1) readonly buffer Zb { float z[]; };     // M × VH·S: the output gate
layout(std430, binding = 2) readonly buffer Bb { float beta[]; };  // M × VH: the beta projection
layout(std430, binding = 3) readonly buffer Ab { float alpha[]; }; // M × VH: the alpha projection
layout(std430, binding = 4) readonly buffer Nb { float nw[]; };    // S: the gated norm's weight
layout(std430, binding = 5) buffer Sb { vec4 state[]; };           // VH × S × S
#ifdef ROUND_X8
// ROUND_X8 (delta_rule_fast_<S>_x8, a decode step: M = 1): the output rounded as quantize_x8
// rounds a row into 32-blocks (d = f16(amax/127), q = roundEven(x·127/amax), each block's Σq),
// in its lane-interleaved layout, for the output product's int8 dot products: no rounding
// stage after the kernel. A head of S holds whole blocks.
layout(std430, binding = 6) writeonly buffer Qb { uint xq[]; };
layout(std430, binding = 9) writeonly buffer XSb { vec2 xs[]; };
#include "exact.glsl" // roundHalf
shared float amaxS[S];
shared int qS[S];
#else
layout(std430, binding = 6) writeonly buffer Ob { float o[]; };    // M × VH·S
#endif
layout(std430, binding = 7) readonly buffer Db { float dtBias[]; }; // VH
layout(std430, binding = 8) readonly buffer Rb { float ra[]; };     // VH: A = -exp(A_log)
layout(push_constant) uniform P { uint M; uint C; uint KH; uint VH; float eps; float scale; } p;

const uint S4 = S / 4u;
shared vec4 qs[2][S4];
shared vec4 ks[2][S4];
shared float part[2][S]; // a subgroup's sum of squares (at most S subgroups)

// load puts token i's query (threads 0..S/4-1) and key (threads S/4..S/2-1) head kh into copy b.
void load(uint i, uint kh, uint b) {
    uint j = gl_LocalInvocationID.x;
    if (j >= 2u * S4) return;
    uint at = i * p.C + kh * S + 4u * (j % S4);
    if (j >= S4) at += p.KH * S;
    vec4 v = vec4(x[at], x[at + 1u], x[at + 2u], x[at + 3u]);
    if (j < S4) {
        qs[b][j] = v;
    } else {
        ks[b][j - S4] = v;
    }
}

float sum4(vec4 v) { return (v.x + v.y) + (v.z + v.w); }

void main() {
    uint hh = gl_WorkGroupID.x;
    uint j = gl_LocalInvocationID.x;
    uint kh = hh % p.KH;
    uint kd = p.KH * S, vd = p.VH * S;
    vec4 row[S4];
    uint base = (hh * S + j) * S4;
    for (uint c = 0u; c < S4; c++) row[c] = state[base + c];
    load(0u, kh, 0u);
    barrier();
    for (uint i = 0u; i < p.M; i++) {
        uint b = i & 1u;
        if (i + 1u < p.M) load(i + 1u, kh, b ^ 1u); // read after this token's barrier
        float v = x[i * p.C + 2u * kd + hh * S + j];
        float be = 1.0 / (1.0 + exp(-beta[i * p.VH + hh]));
        float xa = alpha[i * p.VH + hh] + dtBias[hh];
        float decay = exp((xa > 20.0 ? xa : log(1.0 + exp(xa))) * ra[hh]);

        vec4 kk = vec4(0.0), rk = vec4(0.0);
        for (uint c = 0u; c < S4; c++) {
            vec4 k = ks[b][c];
            kk = fma(k, k, kk);
            rk = fma(row[c], k, rk);
        }
        float sk = 1.0 / max(sqrt(sum4(kk)), p.eps);
        float u = (v - decay * sk * sum4(rk)) * be * sk;

        vec4 qq = vec4(0.0), rq = vec4(0.0);
        for (uint c = 0u; c < S4; c++) {
            vec4 q = qs[b][c];
            vec4 nr = fma(ks[b][c], vec4(u), row[c] * decay);
            row[c] = nr;
            rq = fma(nr, q, rq);
            qq = fma(q, q, qq);
        }
        float oj = sum4(rq) * (p.scale / max(sqrt(sum4(qq)), p.eps));

        // the gated RMS norm of the head's output
        float ss = subgroupAdd(oj * oj);
        if (subgroupElect()) part[b][gl_SubgroupID] = ss;
        barrier();
        ss = 0.0;
        for (uint n = 0u; n < gl_NumSubgroups; n++) ss += part[b][n];
        float zz = z[i * vd + hh * S + j];
        float silu = zz / (1.0 + exp(-zz));
        float res = oj * inversesqrt(ss / float(S) + p.eps) * nw[j] * silu;
#ifdef ROUND_X8
        amaxS[j] = abs(res);
        barrier();
        uint b0 = j & ~31u;
        float amax = 0.0;
        for (uint e = 0u; e < 32u; e++) amax = max(amax, amaxS[b0 + e]);
        float inv = amax > 0.0 ? 127.0 / amax : 0.0;
        int q = int(roundEven(res * inv));
        qS[j] = q;
        barrier();
        uint blk = (hh * S + j) / 32u, w8 = (j % 32u) / 4u; // the block and its word
        if ((j & 3u) == 0u) {
            uint word = (uint(qS[j]) & 0xffu) | ((uint(qS[j + 1u]) & 0xffu) << 8) | ((uint(qS[j + 2u]) & 0xffu) << 16) | (uint(qS[j + 3u]) << 24);
            xq[(((blk / 32u) * 2u + w8 / 4u) * 32u + blk % 32u) * 4u + w8 % 4u] = word;
        }
        if ((j & 31u) == 0u) {
            float sum = 0.0;
            for (uint w = 0u; w < 8u; w++) sum += float((qS[j + 4u * w] + qS[j + 4u * w + 1u]) + (qS[j + 4u * w + 2u] + qS[j + 4u * w + 3u]));
            xs[blk] = vec2(roundHalf(amax / 127.0), sum);
        }
#else
        o[i * vd + hh * S + j] = res;
#endif
    }
    for (uint c = 0u; c < S4; c++) state[base + c] = row[c];
}
