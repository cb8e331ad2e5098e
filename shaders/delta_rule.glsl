// delta_rule.glsl: the Gated DeltaNet's recurrence, included by delta_rule_<S>.comp with S, the
// head size (state_size), defined. One workgroup per value head, one thread per row j of the
// head's S×S state (stored transposed, as engine/cpu keeps it: row j holds S[·][j]), the row in
// registers for the whole window. The window's M tokens are folded in one after another: this
// recurrent form serves prefill as well as decode, on the exact tier (the fast tier's is
// delta_rule_fast.glsl: the same recurrence, one barrier a token instead of about sixteen). Per token:
//
//	q, k   = l2norm(q), l2norm(k)    the query and key head h mod KH, sums of squares exact
//	row j  = e^g row j;  row j += k · β (v_j − row j · k);  o_j = (row j · q) / sqrt(S)
//	out_j  = rmsnorm(o)_j · w_j · silu(z_j)
//
// β and g come from ssm_gates. Dot products run in index order with every product rounded (no
// fused multiply-add), as the CPU reference's loops; the norms' sums of squares are exact
// float-float sums, the roots and quotients correctly rounded.
layout(local_size_x = S) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };     // M × C: q heads, k heads, v heads (after the conv)
layout(std430, binding = 1) readonly buffer Zb { float z[]; };     // M × VH·S: the output gate
layout(std430, binding = 2) readonly buffer Bb { float beta[]; };  // M × VH
layout(std430, binding = 3) readonly buffer Gb { float g[]; };     // M × VH: the log-decay
layout(std430, binding = 4) readonly buffer Nb { float nw[]; };    // S: the gated norm's weight
layout(std430, binding = 5) buffer Sb { float state[]; };          // VH × S × S
layout(std430, binding = 6) writeonly buffer Ob { float o[]; };    // M × VH·S
layout(push_constant) uniform P { uint M; uint C; uint KH; uint VH; float eps; float scale; } p;
#include "exact.glsl"

shared float qs[S];
shared float ks[S];
shared float hiA[S];
shared float loA[S];
shared float hiB[S];
shared float loB[S];

void addPair(inout float ah, inout float al, float bh, float bl) {
    float s, e;
    twoSum(ah, bh, s, e);
    precise float l = e + (al + bl);
    twoSum(s, l, ah, al);
}

// reduce sums the pairs of hiA/loA (and of hiB/loB when both) into element 0.
void reduce(bool both) {
    barrier();
    for (uint n = S / 2u; n > 0u; n >>= 1) {
        uint j = gl_LocalInvocationID.x;
        if (j < n) {
            float h = hiA[j], l = loA[j];
            addPair(h, l, hiA[j + n], loA[j + n]);
            hiA[j] = h;
            loA[j] = l;
            if (both) {
                h = hiB[j];
                l = loB[j];
                addPair(h, l, hiB[j + n], loB[j + n]);
                hiB[j] = h;
                loB[j] = l;
            }
        }
        barrier();
    }
}

// l2scale is 1 / max(sqrt(sum), eps), the sum rounded to float first.
float l2scale(float hi, float lo) {
    precise float sum = hi + lo;
    return divExact(1.0, max(sqrtExact(sum), p.eps));
}

void main() {
    uint hh = gl_WorkGroupID.x;
    uint j = gl_LocalInvocationID.x;
    uint kh = hh % p.KH;
    uint kd = p.KH * S, vd = p.VH * S;
    float row[S];
    uint base = (hh * S + j) * S;
    for (uint c = 0u; c < S; c++) row[c] = state[base + c];
    for (uint i = 0u; i < p.M; i++) {
        uint r = i * p.C;
        float q = x[r + kh * S + j], k = x[r + kd + kh * S + j], v = x[r + 2u * kd + hh * S + j];
        precise float q2 = q * q;
        precise float k2 = k * k;
        hiA[j] = q2;
        loA[j] = 0.0;
        hiB[j] = k2;
        loB[j] = 0.0;
        reduce(true);
        float sq = l2scale(hiA[0], loA[0]), sk = l2scale(hiB[0], loB[0]);
        precise float qn = q * sq;
        precise float kn = k * sk;
        qs[j] = qn;
        ks[j] = kn;
        barrier();

        float decay = expExact(g[i * p.VH + hh]);
        float b = beta[i * p.VH + hh];
        precise float dot = 0.0;
        for (uint c = 0u; c < S; c++) {
            precise float d = row[c] * decay;
            row[c] = d;
            precise float pr = d * ks[c];
            dot = dot + pr;
        }
        precise float delta = (v - dot) * b;
        precise float out_ = 0.0;
        for (uint c = 0u; c < S; c++) {
            precise float u = delta * ks[c];
            precise float nr = row[c] + u;
            row[c] = nr;
            precise float pr = nr * qs[c];
            out_ = out_ + pr;
        }
        precise float oj = out_ * p.scale;

        // the gated RMS norm of the head's output
        precise float o2 = oj * oj;
        hiA[j] = o2;
        loA[j] = 0.0;
        reduce(false);
        precise float sum = hiA[0] + loA[0];
        float mean = divExact(sum, float(S)); // S is a power of two: exact
        precise float me = mean + p.eps;
        float sc = divExact(1.0, sqrtExact(me));
        precise float on = oj * sc;
        precise float onw = on * nw[j];
        float zz = z[i * vd + hh * S + j];
        precise float ez = 1.0 + expExact(-zz);
        float sz = divExact(zz, ez);
        precise float res = onw * sz;
        o[i * vd + hh * S + j] = res;
        barrier(); // every thread has read hiA[0] and the shared q, k before the next token
    }
    for (uint c = 0u; c < S; c++) state[base + c] = row[c];
}
