// attention_prefill_cm2.glsl (attention_prefill_cm2_dNN): causal prefill attention in one pass on
// NVIDIA's cooperative matrix 2 (GL_NV_cooperative_matrix2), writing attention_split's partials
// for attention_merge, with attention_prefill_cm's grid.
//
// A workgroup takes 64 query rows, FA_BR/hp consecutive tokens times the hp query heads that
// share one KV head (row r: token tw + r/hp, head h0 + r%hp), and one of nSplit position ranges
// of their causal span (the last real token's), each at least FA_MIN_RANGE positions (the
// ranges past a short span are empty: their rows write L = 0 and nothing else). Its matrices are workgroup-scope: the driver
// spreads them over the subgroups and stages them itself. Per block of FA_BC positions:
//   S = (scale·Q)·Kᵀ (fp16 operands, fp32 accumulation), masked to each row's causal length;
//   M' = max(M, rowmax S), P = exp(S - M'), L = exp(M - M')·L + rowsum P,
//   O = exp(M - M')·O + P·V (P rounded to fp16 once, like Q).
// The rescaled running sums make it one pass over K and V (attention_prefill_cm makes two).
// Each row's (M, L, O) goes to the partials as attention_split writes them (rows whose token is
// past the prompt write nothing; an empty range writes M = -inf, L = 0, O = 0). K and V are the
// fp16 cache; blocks wholly inside the range load through layouts without a clamp mode, the
// last through a clamping one (positions past the range read as zero and are masked).
// Numerics: as attention_prefill_cm16 (Q and P rounded to fp16 once), within 3e-3 of the
// float64 reference (fast_test.go). The including shader defines FA_HD, the head size.
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef FA_BR
#define FA_BR 64
#endif
#ifndef FA_BC
#define FA_BC 64
#endif
#ifndef FA_MIN_RANGE
#define FA_MIN_RANGE 256u
#endif
#ifndef FA_THREADS
#define FA_THREADS 128
#endif
layout(local_size_x = FA_THREADS) in;

layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float16_t kc[]; };
layout(std430, binding = 2) readonly buffer Vb { float16_t vc[]; };
layout(std430, binding = 3) writeonly buffer Tb { float part[]; };
layout(std430, binding = 4) readonly buffer Pb { uint pos[]; };
layout(push_constant) uniform P {
    uint headDim; uint nHead; uint nKV; uint M; uint qStride; float scale; uint nSplit; uint hp;
} p;

const uint BR = FA_BR, BC = FA_BC, HD = FA_HD;
const float NEG_INF = -1.0 / 0.0;
const float NEG_HALF_MAX = -1.7014117e38; // the running maxima's start: exp(start - M) is 0, never NaN

// loadQ: element (r, c) of the query tile, scaled; zero for rows past the prompt.
float loadQ(const in uint r, const in uint c, const in float e, const in uint tw, const in uint h0) {
    uint t = tw + r / p.hp;
    if (t >= p.M) {
        return 0.0;
    }
    return q[t * p.qStride + (h0 + r % p.hp) * HD + c] * p.scale;
}

// maskS keeps score (r, c) of the block at position j0 where that position is inside the range
// (before end) and the row's causal length, else -inf.
float maskS(const in uint r, const in uint c, const in float e, const in uint j0, const in uint tw, const in uint end) {
    uint t = tw + r / p.hp;
    uint n = t < p.M ? pos[0] + t + 1u : 0u;
    uint j = j0 + c;
    return (j < n && j < end) ? e : NEG_INF;
}

float maxOf(const in float a, const in float b) { return max(a, b); }
float firstOf(const in float a, const in float b) { return a; }
float maxEl(const in uint r, const in uint c, const in float a, const in float b) { return max(a, b); }
float expEl(const in uint r, const in uint c, const in float a) { return exp(a); }

// storeO writes row r's output (unnormalized) to the partials.
float storeO(const in uint r, const in uint c, const in float e, const in uint tw, const in uint h0, const in uint s) {
    uint t = tw + r / p.hp;
    if (t < p.M) {
        part[((t * p.nHead + h0 + r % p.hp) * p.nSplit + s) * (HD + 2u) + 2u + c] = e;
    }
    return e;
}

// storeML writes row r's maximum (-inf where the range held none of its positions) and sum.
float storeML(const in uint r, const in uint c, const in float m, const in float l, const in uint tw, const in uint h0, const in uint s) {
    uint t = tw + r / p.hp;
    if (c == 0u && t < p.M) {
        uint base = ((t * p.nHead + h0 + r % p.hp) * p.nSplit + s) * (HD + 2u);
        part[base] = l > 0.0 ? m : NEG_INF;
        part[base + 1u] = l;
    }
    return m;
}

// FA_BLOCK: one block of BC positions at j0, K and V loaded through the layouts LK and LV.
#define FA_BLOCK(LK, LV) { \
    coopmat<float16_t, gl_ScopeWorkgroup, HD, BC, gl_MatrixUseB> kt; \
    coopMatLoadTensorNV(kt, kc, kvOff, sliceTensorLayoutNV(LK, j0, BC, 0u, HD), transposed); \
    coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> sc = \
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(0.0); \
    sc = coopMatMulAdd(qa, kt, sc); \
    if (j0 + BC > diag || j0 + BC > end) { \
        coopMatPerElementNV(sc, sc, maskS, j0, tw, end); \
    } \
    coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> rowMax, mNew, pr, eM; \
    coopMatReduceNV(rowMax, sc, gl_CooperativeMatrixReduceRowNV, maxOf); \
    coopMatPerElementNV(mNew, rowMax, maxEl, mRun); \
    coopMatPerElementNV(pr, sc - mNew, expEl); \
    coopMatPerElementNV(eM, mRun - mNew, expEl); \
    mRun = mNew; \
    coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA> pa = \
        coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA>(pr); \
    coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> rowSum = \
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(0.0); \
    rowSum = coopMatMulAdd(pa, ones, rowSum); \
    lRun = eM * lRun + rowSum; \
    coopmat<float, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseAccumulator> eMRow; \
    coopMatReduceNV(eMRow, eM, gl_CooperativeMatrixReduceRowNV, firstOf); \
    coopmat<float16_t, gl_ScopeWorkgroup, BC, HD, gl_MatrixUseB> vb; \
    coopMatLoadTensorNV(vb, vc, kvOff, sliceTensorLayoutNV(LV, j0, BC, 0u, HD)); \
    o = o * eMRow; \
    o = coopMatMulAdd(pa, vb, o); \
}

void main() {
    uint hp = p.hp;
    uint group = p.nHead / p.nKV, perKV = group / hp;
    uint kvh = gl_WorkGroupID.x / perKV;
    uint h0 = kvh * group + (gl_WorkGroupID.x % perKV) * hp;
    uint tw = gl_WorkGroupID.y * (BR / hp);    // the workgroup's first token
    uint s = gl_WorkGroupID.z;
    uint pos0 = pos[0];
    uint span = pos0 + min(tw + BR / hp, p.M); // the workgroup's last real token's causal length
    // Ranges of at least FA_MIN_RANGE positions: a short span leaves the later ranges empty
    // rather than every range a fraction of one block.
    uint L = max((span + p.nSplit - 1u) / p.nSplit, FA_MIN_RANGE);
    uint start = min(span, s * L), end = min(span, start + L);
    if (start >= end) { // uniform: an empty range's rows hold no position (attention_merge skips L = 0)
        for (uint i = gl_LocalInvocationID.x; i < BR; i += FA_THREADS) {
            uint t = tw + i / hp;
            if (t < p.M) {
                uint base = ((t * p.nHead + h0 + i % hp) * p.nSplit + s) * (HD + 2u);
                part[base] = NEG_INF;
                part[base + 1u] = 0.0;
            }
        }
        return;
    }
    uint diag = pos0 + tw + 1u;                // blocks ending past it need the causal mask
    uint kvStride = p.nKV * HD, kvOff = kvh * HD;

    coopmat<float, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseAccumulator> qf =
        coopmat<float, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseAccumulator>(0.0);
    coopMatPerElementNV(qf, qf, loadQ, tw, h0);
    coopmat<float16_t, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseA> qa =
        coopmat<float16_t, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseA>(qf);
    coopmat<float16_t, gl_ScopeWorkgroup, BC, BC, gl_MatrixUseB> ones =
        coopmat<float16_t, gl_ScopeWorkgroup, BC, BC, gl_MatrixUseB>(1.0);

    coopmat<float, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseAccumulator> o =
        coopmat<float, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseAccumulator>(0.0);
    coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> mRun =
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(NEG_HALF_MAX);
    coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> lRun =
        coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(0.0);

    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
    // Interior blocks: no clamp mode, the stride rounded down to a multiple of 8 (HD is one:
    // a no-op that tells the compiler the rows are 16-byte aligned).
    tensorLayoutNV<2> fk = createTensorLayoutNV(2);
    fk = setTensorLayoutDimensionNV(fk, end, HD);
    fk = setTensorLayoutStrideNV(fk, kvStride & ~7u, 1);
    // The last block: positions past the range read as zero.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ck = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    ck = setTensorLayoutDimensionNV(ck, end, HD);
    ck = setTensorLayoutStrideNV(ck, kvStride, 1);

    uint j0 = start;
    for (; j0 + BC <= end; j0 += BC) {
        FA_BLOCK(fk, fk)
    }
    if (j0 < end) {
        FA_BLOCK(ck, ck)
    }

    coopMatPerElementNV(o, o, storeO, tw, h0, s);
    coopMatPerElementNV(mRun, mRun, storeML, lRun, tw, h0, s);
}
