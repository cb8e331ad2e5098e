// quantize_x8.glsl (quantize_x8.comp; quantize_x8_gate.comp with GATE): rounds rows of activations (K floats each, K a multiple of 32; one row per grid
// line y) to int8 blocks of
// 32 for matvec_x8: d = f16(amax/127), q = roundEven(x·127/amax) (Q8_0's rounding, as
// matvec_fast rounds Q4_0/Q8_0 activations in registers), and each block's integer sum Σq.
// What it rounds (flags):
//   0:        x as it is;
//   F_NORM:   RMSNorm(x)·g, x·g·(1/sqrt(mean(x²)+eps)) as rmsnorm_fast computes it (each
//             workgroup of the row's grid line sums the squares of the whole row, in the same
//             order, then rounds its own blocks: one workgroup a row took ~3 round trips to
//             memory and a dozen barriers in series);
//   F_SWIGLU: silu(x)·u, rounded as swiglu.comp rounds it;
//   F_GATE:   (quantize_x8_gate only) x·sigmoid(gate), the gated attention's output as
//             attn_gate rounds it, the gates the second half of each head's 2·headDim values
//             in u (the query projection);
//   F_MERGE:  attention_merge's output from attention_split's partials in x (per (head,
//             token) nSplit ranges of headDim + 2 floats: the range's maximum M, its sum S and
//             its headDim sums), o = Σ_s exp(M_s − M*)·acc_s / Σ_s exp(M_s − M*)·S_s as
//             attention_merge.comp computes it (one stage fewer a decode step).
// and how (flags & F_Q8K): 32-blocks by default; with F_Q8K, 256-blocks as llama.cpp's Q8_K
// rounds for the K-quants and i-quants (K a multiple of 256): max the signed element of largest
// magnitude (the first on ties), iscale = -127/max, q = min(127, roundEven(iscale·x)), d =
// 1/iscale in f32, every 32-block of the 256 carrying that d and its own Σq.
// Layout (lane-interleaved so a subgroup's lanes, one block each, load neighbouring 16-byte
// words): the two 16-byte halves h of block u sit at xq4[((u/32)·2 + h)·32 + u%32]; xs[u] =
// (d, Σq); row t's output starts x8QuantBytes(K) bytes and K/32 blocks after row t-1's (x8.go).
// Eight threads a block, one vec4 each; the block's largest magnitude and sum go
// through shared memory.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 1) writeonly buffer Qb { uint xq[]; };
layout(std430, binding = 2) writeonly buffer Sb { vec2 xs[]; };
layout(std430, binding = 3) readonly buffer Ub { vec4 u4[]; }; // F_SWIGLU: the up projection; F_GATE: the gated queries
layout(std430, binding = 4) readonly buffer Gb { vec4 g4[]; }; // F_NORM: the norm's weight
layout(std430, binding = 0) readonly buffer Pb { float ap[]; }; // F_MERGE: attention partials
// rows: the grid's y; headDim with F_MERGE and F_GATE, nHead and nSplit only with F_MERGE
layout(push_constant) uniform P { uint K; uint flags; float eps; uint headDim; uint nHead; uint nSplit; } p;
const uint F_NORM = 1u, F_SWIGLU = 2u, F_Q8K = 4u, F_MERGE = 8u;
#ifdef GATE
const uint F_GATE = 16u;
#endif

// The merge (F_MERGE) sums each output element's ranges in MERGE_LANES interleaved lanes,
// lane l taking ranges l, l + MERGE_LANES, ... in order, then adds the lanes in lane order
// ((a0 + a1) + a2) + a3: a pass of the workgroup covers MERGE_VEC4 vec4s with all its
// threads, so a 4096-wide token takes 16 workgroups, each thread 1/4 of the ranges (one thread
// a vec4 over every range took 4 workgroups and was most of the attention output product's
// time). attention_merge.comp sums in the same order, value for value.
const uint MERGE_LANES = 4u, MERGE_VEC4 = 256u / MERGE_LANES; // a pass: whole Q8_K 256-blocks

// mergedLane returns lane sl's sum for the attention output's elements e..e+3 (one head:
// headDim is a multiple of 4) of token t, with the head's range maximum mx and ns nonempty
// ranges, the weights computed in place (heads too many for the shared weights).
vec4 mergedLane(uint t, uint e, uint sl, float mx, uint ns) {
    uint h = e / p.headDim, d = e % p.headDim;
    uint stride = p.headDim + 2u;
    uint base = (t * p.nHead + h) * p.nSplit * stride;
    vec4 acc = vec4(0.0);
    for (uint s = sl; s < ns; s += MERGE_LANES) {
        uint b = base + s * stride;
        float w = exp(ap[b] - mx);
        acc += w * vec4(ap[b + 2u + d], ap[b + 3u + d], ap[b + 4u + d], ap[b + 5u + d]);
    }
    return acc;
}

// headRanges returns head h of token t's nonempty ranges, its maximum and 1/Σ_s w_s·S_s in
// range order (attention_split fills the ranges in order: the first empty one ends them).
void headRanges(uint t, uint h, out uint ns, out float mx, out float inv) {
    uint stride = p.headDim + 2u;
    uint base = (t * p.nHead + h) * p.nSplit * stride;
    mx = -1.0 / 0.0;
    ns = p.nSplit;
    for (uint s = 0u; s < p.nSplit; s++) {
        if (!(ap[base + s * stride + 1u] > 0.0)) {
            ns = s;
            break;
        }
        mx = max(mx, ap[base + s * stride]);
    }
    float tot = 0.0;
    for (uint s = 0u; s < ns; s++) {
        uint b = base + s * stride;
        tot += exp(ap[b] - mx) * ap[b + 1u];
    }
    inv = tot > 0.0 ? 1.0 / tot : 0.0;
}

// Through shared memory: a pass's heads' range weights are computed once by the workgroup
// (mergeWeights) instead of by every thread serially; mergedLaneShared then sums a lane's
// ranges with them. Same arithmetic: w = exp(M_s - M*), tot summed in range order.
const uint MERGE_MAX = 2048u; // (heads in a pass) x ranges the shared weights hold
shared float mW[MERGE_MAX];   // a range's maximum M, then its weight exp(M - M*)
shared float mS[MERGE_MAX];   // a range's sum S
shared uint hNs[64];          // a head's nonempty ranges
shared float hMx[64], hInv[64];
shared vec4 mLane[256];       // each thread's lane sum

// mergeWeights fills mW, hNs and hInv for the nh heads from h0 of token t. Every thread calls it.
void mergeWeights(uint t, uint h0, uint nh, uint tid) {
    uint stride = p.headDim + 2u;
    uint n = nh * p.nSplit;
    for (uint j = tid; j < n; j += 256u) {
        uint b = ((t * p.nHead + h0 + j / p.nSplit) * p.nSplit + j % p.nSplit) * stride;
        mW[j] = ap[b];
        mS[j] = ap[b + 1u];
    }
    barrier();
    if (tid < nh) {
        uint ns = p.nSplit;
        float mx = -1.0 / 0.0;
        for (uint s = 0u; s < p.nSplit; s++) {
            if (!(mS[tid * p.nSplit + s] > 0.0)) {
                ns = s;
                break;
            }
            mx = max(mx, mW[tid * p.nSplit + s]);
        }
        hNs[tid] = ns;
        hMx[tid] = mx;
    }
    barrier();
    for (uint j = tid; j < n; j += 256u) {
        uint hh = j / p.nSplit;
        mW[j] = j % p.nSplit < hNs[hh] ? exp(mW[j] - hMx[hh]) : 0.0;
    }
    barrier();
    if (tid < nh) {
        float tot = 0.0;
        for (uint s = 0u; s < hNs[tid]; s++) tot += mW[tid * p.nSplit + s] * mS[tid * p.nSplit + s];
        hInv[tid] = tot > 0.0 ? 1.0 / tot : 0.0;
    }
    barrier();
}

// mergedLaneShared is mergedLane through mergeWeights' results (h0 the pass's first head).
vec4 mergedLaneShared(uint t, uint e, uint sl, uint h0) {
    uint h = e / p.headDim, d = e % p.headDim, hh = h - h0;
    uint stride = p.headDim + 2u;
    uint base = (t * p.nHead + h) * p.nSplit * stride;
    vec4 acc = vec4(0.0);
    uint ns = hNs[hh];
    for (uint s = sl; s < ns; s += MERGE_LANES) {
        uint b = base + s * stride;
        acc += mW[hh * p.nSplit + s] * vec4(ap[b + 2u + d], ap[b + 3u + d], ap[b + 4u + d], ap[b + 5u + d]);
    }
    return acc;
}

#include "exact.glsl" // roundHalf, expExact, divExact
#include "x8_round.glsl"

shared float part[256];
shared float sval[256]; // F_Q8K: each thread's signed value of largest magnitude
shared float grpMax[32], grpVal[32]; // F_Q8K: each 8-thread group's
shared float ssPart[32];

float swiglu(float a, float b) {
    precise float e = 1.0 + expExact(-a);
    float s = divExact(a, e);
    precise float r = s * b;
    return r;
}

#ifdef GATE
float gated(float a, float g) {
    precise float e = 1.0 + expExact(-g);
    float s = divExact(1.0, e);
    precise float r = a * s;
    return r;
}
#endif

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint n4 = p.K / 4u;
    uint row = gl_WorkGroupID.y;
    uint x0 = row * n4;                                  // this row's x (and u) in vec4s
    uint q0 = row * ((p.K / 32u + 31u) / 32u) * 256u;    // its int8 words: x8QuantBytes(K) / 4
    uint s0 = row * (p.K / 32u);                         // its blocks
    float scale = 1.0;
    bool norm = (p.flags & F_NORM) != 0u;
    bool merge = (p.flags & F_MERGE) != 0u;
    uint per = merge ? MERGE_VEC4 : 256u; // vec4s a pass
    uint first = gl_WorkGroupID.x * per;
    uint step = gl_NumWorkGroups.x * per;
    // A decode step is latency: the first pass's own x and norm weight are loaded here, beside
    // the squares' loads, and the squares' loads go in batches of four before any is used (one
    // trip to memory where each vec4 waited for the last: a 4096-wide row took four). The same
    // sums in the same order.
    uint iFirst = first + tid;
    vec4 xFirst = vec4(0.0), gFirst = vec4(0.0);
    if (!merge && iFirst < n4) xFirst = x4[x0 + iFirst];
    if (norm && iFirst < n4) gFirst = g4[iFirst];
    if (norm) { // every workgroup sums the squares over all of x first, in the same order
        float ss = 0.0;
        for (uint i0 = tid; i0 < n4; i0 += 4u * 256u) {
            vec4 b[4];
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint i = i0 + 256u * j;
                b[j] = i < n4 ? x4[x0 + i] : vec4(0.0);
            }
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                if (i0 + 256u * j < n4) ss += dot(b[j], b[j]);
            }
        }
        ss = subgroupAdd(ss);
        if (subgroupElect()) ssPart[gl_SubgroupID] = ss;
        barrier();
        float total = 0.0;
        for (uint g = 0u; g < gl_NumSubgroups; g++) total += ssPart[g];
        scale = inversesqrt(total / float(p.K) + p.eps);
    }
    for (uint i0 = first; i0 < n4; i0 += step) { // uniform: every thread takes every pass
        uint i = i0 + tid; // this thread's vec4: word i % 8 of block i / 8
        bool live = i < n4 && tid < per;
        vec4 v = vec4(0.0);
        if (merge) { // uniform: the pass's heads; thread tid sums lane tid / MERGE_VEC4
            uint mh0 = 4u * i0 / p.headDim;
            uint mnh = (min(4u * (i0 + per), p.K) - 1u) / p.headDim - mh0 + 1u;
            bool mshared = mnh <= 64u && mnh * p.nSplit <= MERGE_MAX;
            if (mshared) mergeWeights(row, mh0, mnh, tid);
            uint ie = i0 + tid % MERGE_VEC4, sl = tid / MERGE_VEC4;
            vec4 lane = vec4(0.0);
            float inv = 0.0;
            if (ie < n4) {
                if (mshared) {
                    lane = mergedLaneShared(row, 4u * ie, sl, mh0);
                    inv = hInv[4u * ie / p.headDim - mh0];
                } else {
                    uint ns;
                    float mx;
                    headRanges(row, 4u * ie / p.headDim, ns, mx, inv);
                    lane = mergedLane(row, 4u * ie, sl, mx, ns);
                }
            }
            mLane[tid] = lane;
            barrier();
            if (live) {
                vec4 sum = mLane[tid];
                [[unroll]] for (uint l = 1u; l < MERGE_LANES; l++) sum += mLane[l * MERGE_VEC4 + tid];
                v = sum * inv;
            }
        }
        if (live) {
            if (!merge) v = i0 == first ? xFirst : x4[x0 + i];
            if (norm) v = v * scale * (i0 == first ? gFirst : g4[i]);
            if ((p.flags & F_SWIGLU) != 0u) {
                vec4 b = u4[x0 + i];
                v = vec4(swiglu(v.x, b.x), swiglu(v.y, b.y), swiglu(v.z, b.z), swiglu(v.w, b.w));
            }
#ifdef GATE
            if ((p.flags & F_GATE) != 0u) { // element 4i of the row: head e / headDim
                uint e = 4u * i;
                vec4 gv = u4[(row * 2u * p.K + 2u * e - e % p.headDim + p.headDim) / 4u];
                v = vec4(gated(v.x, gv.x), gated(v.y, gv.y), gated(v.z, gv.z), gated(v.w, gv.w));
            }
#endif
        }
        float tv;
        part[tid] = x8FirstMax(v, tv);
        sval[tid] = tv;
        barrier();
        uint b0 = tid & ~7u;
        float amax = 0.0, d;
        ivec4 q;
        if ((p.flags & F_Q8K) != 0u) { // uniform
            // the first largest magnitude of each 8-thread group, then of the 256-block's 8 groups
            float gm = part[b0], gv = sval[b0];
            for (uint j = 1u; j < 8u; j++) {
                if (part[b0 + j] > gm) { gm = part[b0 + j]; gv = sval[b0 + j]; }
            }
            if ((tid & 7u) == 0u) { grpMax[tid >> 3] = gm; grpVal[tid >> 3] = gv; }
            barrier();
            uint g0 = (tid & ~63u) >> 3; // this 256-block's first group
            float bm = grpMax[g0], bv = grpVal[g0];
            for (uint j = 1u; j < 8u; j++) {
                if (grpMax[g0 + j] > bm) { bm = grpMax[g0 + j]; bv = grpVal[g0 + j]; }
            }
            q = x8RoundQ8K(v, bm, bv, d);
        } else {
            [[unroll]] for (uint j = 0u; j < 8u; j++) amax = max(amax, part[b0 + j]);
            q = x8Round32(v, amax, d);
        }
        barrier(); // everyone has read the maxima
        part[tid] = float((q.x + q.y) + (q.z + q.w));
        barrier();
        if (live) {
            uint u = i / 8u, j = i % 8u;
            xq[q0 + x8WordIndex(u, j)] = x8Word(q);
            if (j == 0u) {
                float sum = 0.0;
                [[unroll]] for (uint jj = 0u; jj < 8u; jj++) sum += part[b0 + jj];
                xs[s0 + u] = vec2(d, sum);
            }
        }
        barrier(); // part is reused by the next pass
    }
}
