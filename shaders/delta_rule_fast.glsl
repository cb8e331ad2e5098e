// delta_rule_fast.glsl: the Gated DeltaNet's recurrence on the fast tier, included by
// delta_rule_fast_<S>.comp with S, the head size (state_size), defined. The same arithmetic as
// delta_rule.glsl in f32 with fused multiply-adds, four partial sums a dot product and the
// device's exp, sqrt and division: one workgroup per value head, one thread per row j of the
// head's S×S state (stored transposed: row j holds S[·][j]), the row in registers for the
// whole window. Per token:
//
//	β, g  = sigmoid(β), softplus(α + dt_bias)·A   ssm_gates' gates, from the raw projections
//	sq, sk = 1 / max(‖q‖, eps), 1 / max(‖k‖, eps)  (l2norm(k)·x = k·(x·sk))
//	row j = e^g row j + k · sk·β (v_j − e^g sk (row j · k))
//	o_j   = (row j · q) · sq / sqrt(S)
//	out_j = rmsnorm(o)_j · w_j · silu(z_j)   (the head's sum of squares: a subgroup sum, the
//	                                         subgroups' partials in shared memory, the barrier)
//
// (so no ssm_gates stage before it). Nothing of a token is read from memory on its own path:
// the window goes in chunks of CH tokens, and while the workgroup folds in one chunk, each thread
// holds its loads of the next (queries and keys, its row's v and z, the raw gates) in
// registers; at the chunk's end they go to shared memory, where a few threads compute each
// token's gates and inverse norms once for all rows. A token then costs its dot products and
// the norm's one barrier (the first form loaded each token's q and k while the previous one was
// folded in, and waited for v, z and the gates on every token). Dot products end in another
// order than the CPU reference's: the kernel is held to a stated bound of a float64 reference
// (TestDeltaRuleMatchesFloat64Reference).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
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
#include "x8_round.glsl" // x8Word, x8WordIndex
shared float amaxS[S];
shared int qS[S];
#else
layout(std430, binding = 6) writeonly buffer Ob { float o[]; };    // M × VH·S
#endif
layout(std430, binding = 7) readonly buffer Db { float dtBias[]; }; // VH
layout(std430, binding = 8) readonly buffer Rb { float ra[]; };     // VH: A = -exp(A_log)
layout(push_constant) uniform P { uint M; uint C; uint KH; uint VH; float eps; float scale; } p;

const uint S4 = S / 4u;
const uint CH = 8u;             // tokens a chunk
const uint LOADS = 2u * CH * S4 / S; // the vec4s of a chunk's queries and keys each thread loads (4)
shared vec4 qk[2u * CH * S4];   // token t's query at t·2·S4, its key S4 after
shared float vz[2u * CH * S];   // token t's v at t·S + j, its z at (CH + t)·S + j: thread j's own
shared float gate[2u * CH];     // token t's β at 2t, e^g at 2t + 1
shared float inorm[2u * CH];    // token t's sq at 2t, sk at 2t + 1
shared float part[2][S];        // a subgroup's sum of squares (at most S subgroups)

float sum4(vec4 v) { return (v.x + v.y) + (v.z + v.w); }

// chunkRegs are one thread's loads of a chunk.
struct chunkRegs {
    vec4 qk[LOADS];
    float v[CH];
    float z[CH];
    float beta, alpha; // token gl_LocalInvocationID.x's, for the first CH threads
};

// loadChunk loads the n tokens from t0 on (head hh, key head kh) into registers.
void loadChunk(uint t0, uint n, uint hh, uint kh, out chunkRegs r) {
    uint j = gl_LocalInvocationID.x;
    uint kd = p.KH * S, vd = p.VH * S;
    [[unroll]] for (uint e = 0u; e < LOADS; e++) {
        uint u = j + e * S;                    // the chunk's vec4 u: token u / (2·S4)
        uint t = u / (2u * S4), w = u % (2u * S4);
        uint at = (t0 + t) * p.C + (w < S4 ? 0u : kd) + kh * S + 4u * (w % S4);
        r.qk[e] = t < n ? vec4(x[at], x[at + 1u], x[at + 2u], x[at + 3u]) : vec4(0.0);
    }
    [[unroll]] for (uint t = 0u; t < CH; t++) {
        r.v[t] = t < n ? x[(t0 + t) * p.C + 2u * kd + hh * S + j] : 0.0;
        r.z[t] = t < n ? z[(t0 + t) * vd + hh * S + j] : 0.0;
    }
    r.beta = j < n ? beta[(t0 + j) * p.VH + hh] : 0.0;
    r.alpha = j < n ? alpha[(t0 + j) * p.VH + hh] : 0.0;
}

// stageChunk puts a chunk of n tokens from registers into shared memory, with each token's
// gates (dt, a: the head's dt bias and A) and inverse norms; every thread calls it (two
// barriers).
void stageChunk(uint n, float dt, float a, chunkRegs r) {
    uint j = gl_LocalInvocationID.x;
    [[unroll]] for (uint e = 0u; e < LOADS; e++) qk[j + e * S] = r.qk[e];
    [[unroll]] for (uint t = 0u; t < CH; t++) {
        vz[t * S + j] = r.v[t];
        vz[(CH + t) * S + j] = r.z[t];
    }
    if (j < n) {
        float xa = r.alpha + dt;
        gate[2u * j] = 1.0 / (1.0 + exp(-r.beta));
        gate[2u * j + 1u] = exp((xa > 20.0 ? xa : log(1.0 + exp(xa))) * a);
    }
    barrier();
    if (j < 2u * n) { // token j / 2's query (j even) or key
        uint b = (j / 2u) * 2u * S4 + (j % 2u) * S4;
        vec4 ss = vec4(0.0);
        for (uint c = 0u; c < S4; c++) ss = fma(qk[b + c], qk[b + c], ss);
        inorm[j] = 1.0 / max(sqrt(sum4(ss)), p.eps);
    }
    barrier();
}

void main() {
    uint hh = gl_WorkGroupID.x;
    uint j = gl_LocalInvocationID.x;
    uint kh = hh % p.KH;
    uint vd = p.VH * S;
    vec4 row[S4];
    uint base = (hh * S + j) * S4;
    [[unroll]] for (uint c = 0u; c < S4; c++) row[c] = state[base + c];
    chunkRegs next;
    loadChunk(0u, min(CH, p.M), hh, kh, next);
    // the head's constants, loaded with the state and the first chunk (a decode step is
    // latency: each load first used after a barrier was a trip to memory of its own)
    float dt = dtBias[hh], a = ra[hh], nwj = nw[j];
    for (uint t0 = 0u; t0 < p.M; t0 += CH) {
        uint n = min(CH, p.M - t0);
        stageChunk(n, dt, a, next);
        if (t0 + CH < p.M) loadChunk(t0 + CH, min(CH, p.M - t0 - CH), hh, kh, next); // used at the chunk's end
        for (uint t = 0u; t < n; t++) {
            uint i = t0 + t, b = i & 1u, q0 = t * 2u * S4, k0 = q0 + S4;
            float be = gate[2u * t], decay = gate[2u * t + 1u];
            float sq = inorm[2u * t], sk = inorm[2u * t + 1u];
            vec4 rk = vec4(0.0);
            [[unroll]] for (uint c = 0u; c < S4; c++) rk = fma(row[c], qk[k0 + c], rk);
            float u = (vz[t * S + j] - decay * sk * sum4(rk)) * be * sk;
            vec4 rq = vec4(0.0);
            [[unroll]] for (uint c = 0u; c < S4; c++) {
                vec4 nr = fma(qk[k0 + c], vec4(u), row[c] * decay);
                row[c] = nr;
                rq = fma(nr, qk[q0 + c], rq);
            }
            float oj = sum4(rq) * (p.scale * sq);

            // the gated RMS norm of the head's output
            float ss = subgroupAdd(oj * oj);
            if (subgroupElect()) part[b][gl_SubgroupID] = ss;
            barrier();
            ss = 0.0;
            for (uint g = 0u; g < gl_NumSubgroups; g++) ss += part[b][g];
            float zz = vz[(CH + t) * S + j];
            float silu = zz / (1.0 + exp(-zz));
            float res = oj * inversesqrt(ss / float(S) + p.eps) * nwj * silu;
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
            xq[x8WordIndex(blk, w8)] = x8Word(ivec4(qS[j], qS[j + 1u], qS[j + 2u], qS[j + 3u]));
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
    }
    [[unroll]] for (uint c = 0u; c < S4; c++) state[base + c] = row[c];
}
