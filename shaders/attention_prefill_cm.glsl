// attention_prefill_cm.glsl (attention_prefill_cm and attention_prefill_cm16): the fast tier's causal prefill attention on cooperative matrices
// (flash-attention tiles), writing attention_split's partials for attention_merge.
//
// A query tile is 16 rows: TQ = 16/hp consecutive tokens times the hp query heads that share
// one KV head. A workgroup of 4 subgroups takes 4 consecutive tiles (one each) and one of
// nSplit position ranges of their causal span (the last real token's). K and V rows come
// through shared memory 64 positions at a time, as fp16, staged once for the 4 tiles
// (positions past the range are zeros). Each subgroup makes two passes over the range, 16
// positions a step:
//   1. S = Q·Kᵀ (fp32 accumulation), scaled and masked per row to the row's causal length:
//      the row maxima M;
//   2. S again, P = exp(S - M) with the row sums L in f32, then O += P·V in fp32 fragments.
// The second pass knows the final maxima, so O is never rescaled. Each row's (M, L, O) goes
// to the partials as attention_split writes them (rows whose token is past the prompt write
// nothing; an empty range writes M = -inf, L = 0, O = 0).
// Numerics: K and V are the fp16 cache. Q and P enter the fp16 products as a high part plus
// a scaled fp16 remainder (two products each, the remainder's scaled by 2^10 and P by 2^12 so
// that neither falls into fp16 subnormals), so scores and outputs carry f32-level errors:
// the float64-reference bound of attention_split (fast_test.go). With FA_FP16 (the
// attention_prefill_cm16 kernel) Q and P are rounded to fp16 once (P scaled by 2^12), one
// product each: half the matrix work, outputs within 3e-3 of the reference (fast_test.go).
// headDim is a multiple of 16, at most 128; hp divides 16.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { uvec4 kc4[]; };
layout(std430, binding = 2) readonly buffer Vb { uvec4 vc4[]; };
layout(std430, binding = 3) writeonly buffer Tb { float part[]; };
layout(std430, binding = 4) readonly buffer Pb { uint pos[]; };
layout(push_constant) uniform P {
    uint headDim; uint nHead; uint nKV; uint M; uint qStride; float scale; uint nSplit; uint hp;
} p;

const uint MAXHD = 128u;
const uint CH = 64u;                   // positions staged per step
const uint HDP = MAXHD / 4u + 2u;      // padded row stride in f16vec4 (272 bytes: no bank conflicts)
const float QLO = 1024.0, PSC = 4096.0;
// K rows at kv[j*HDP], V rows at kv[(CH + j)*HDP]; before the first step the same memory holds
// the subgroups' query tiles (subgroup g: high parts at rows 32g.., remainders at 32g+16..).
shared f16vec4 kv[2u * CH * HDP];
shared float ss[4u * 256u];            // per subgroup: a 16x16 score (and output) tile, row-major
shared f16vec4 ps[4u * 64u];           // per subgroup: a weight tile's high parts
#ifndef FA_FP16
shared f16vec4 pl[4u * 64u];           // and remainders
#endif

// fp16Head keeps the sign, exponent and top 10 mantissa bits of each component: a value fp16
// holds exactly (for normal magnitudes), with v - fp16Head(v) exact in f32. Masking bits rather
// than converting to fp16 and back: a driver may fold that round trip to the identity, which
// made every remainder 0 (measured on the H200).
vec4 fp16Head(vec4 v) { return uintBitsToFloat(floatBitsToUint(v) & uvec4(0xffffe000u)); }

void main() {
    uint tid = gl_LocalInvocationID.x, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint hp = p.hp, tq = 16u / hp, hd = p.headDim, hd4 = hd / 4u, hd8 = hd / 8u, nf = hd / 16u;
    uint group = p.nHead / p.nKV, perKV = group / hp;
    uint kvh = gl_WorkGroupID.x / perKV;
    uint h0 = kvh * group + (gl_WorkGroupID.x % perKV) * hp;
    uint tw = gl_WorkGroupID.y * 4u * tq;     // the workgroup's first token
    uint t0 = tw + sg * tq, s = gl_WorkGroupID.z;
    uint pos0 = pos[0];
    uint span = pos0 + min(tw + 4u * tq, p.M); // the workgroup's last real token's causal length
    uint L = (span + p.nSplit - 1u) / p.nSplit;
    uint start = min(span, s * L), end = min(span, start + L);

    // The query tiles: row r = token t0 + r/hp, head h0 + r%hp; rows past M are zeros.
    for (uint i = lane; i < 16u * hd4; i += 32u) {
        uint r = i / hd4, c = i % hd4, t = t0 + r / hp;
        vec4 v = vec4(0.0);
        if (t < p.M) {
            uint o = t * p.qStride + (h0 + r % hp) * hd + 4u * c;
            v = vec4(q[o], q[o + 1u], q[o + 2u], q[o + 3u]);
        }
#ifdef FA_FP16
        kv[(32u * sg + r) * HDP + c] = f16vec4(v);
#else
        vec4 hi = fp16Head(v);
        kv[(32u * sg + r) * HDP + c] = f16vec4(hi);
        kv[(32u * sg + 16u + r) * HDP + c] = f16vec4((v - hi) * QLO);
#endif
    }
    barrier();
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> qa[MAXHD / 16u];
#ifndef FA_FP16
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> qb[MAXHD / 16u];
#endif
    [[unroll]] for (uint f = 0u; f < MAXHD / 16u; f++) {
        if (f < nf) {
            coopMatLoad(qa[f], kv, 32u * sg * HDP + 4u * f, HDP, gl_CooperativeMatrixLayoutRowMajor);
#ifndef FA_FP16
            coopMatLoad(qb[f], kv, (32u * sg + 16u) * HDP + 4u * f, HDP, gl_CooperativeMatrixLayoutRowMajor);
#endif
        }
    }

    // This lane's half row of each score tile: row rr, columns 8·hf .. 8·hf+7.
    uint rr = lane / 2u, hf = lane % 2u;
    uint tRow = t0 + rr / hp;
    uint nRow = tRow < p.M ? pos0 + tRow + 1u : 0u; // the row's causal length (0: no row)
    uint kvRowU = p.nKV * hd8;                      // uvec4 (8 halves) per cache row
    float mRow = -1.0 / 0.0, lRow = 0.0;
    uint so = sg * 256u, po = sg * 64u;

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> oacc[MAXHD / 16u];
    [[unroll]] for (uint f = 0u; f < MAXHD / 16u; f++)
        oacc[f] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);

    for (uint pass = 0u; pass < 2u; pass++) {
        for (uint j0 = start; j0 < end; j0 += CH) {
            barrier(); // the previous step (or the query loads) have read kv
            for (uint i = tid; i < CH * hd8; i += 128u) {
                uint j = i / hd8, c = i % hd8, row = j0 + j;
                bool in_ = row < end;
                uvec4 kw = in_ ? kc4[row * kvRowU + kvh * hd8 + c] : uvec4(0u);
                kv[j * HDP + 2u * c] = f16vec4(unpackHalf2x16(kw.x), unpackHalf2x16(kw.y));
                kv[j * HDP + 2u * c + 1u] = f16vec4(unpackHalf2x16(kw.z), unpackHalf2x16(kw.w));
                if (pass == 1u) {
                    uvec4 vw = in_ ? vc4[row * kvRowU + kvh * hd8 + c] : uvec4(0u);
                    kv[(CH + j) * HDP + 2u * c] = f16vec4(unpackHalf2x16(vw.x), unpackHalf2x16(vw.y));
                    kv[(CH + j) * HDP + 2u * c + 1u] = f16vec4(unpackHalf2x16(vw.z), unpackHalf2x16(vw.w));
                }
            }
            barrier();
            for (uint js = 0u; js < CH; js += 16u) {
                uint jb = j0 + js;
                if (jb >= end) break; // uniform
                coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> sh =
                    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
#ifndef FA_FP16
                coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> sl = sh;
#endif
                [[unroll]] for (uint f = 0u; f < MAXHD / 16u; f++) {
                    if (f < nf) {
                        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> kb;
                        // B[k = dim][n = position] column-major: position n at n*HDP, dims 16f..
                        coopMatLoad(kb, kv, js * HDP + 4u * f, HDP, gl_CooperativeMatrixLayoutColumnMajor);
                        sh = coopMatMulAdd(qa[f], kb, sh);
#ifndef FA_FP16
                        sl = coopMatMulAdd(qb[f], kb, sl);
#endif
                    }
                }
#ifndef FA_FP16
                sh = sh + sl * float(1.0 / QLO);
#endif
                coopMatStore(sh, ss, so, 16u, gl_CooperativeMatrixLayoutRowMajor);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                float sv[8];
                float mx = -1.0 / 0.0;
                [[unroll]] for (uint c = 0u; c < 8u; c++) {
                    uint j = jb + 8u * hf + c;
                    sv[c] = (j < end && j < nRow) ? ss[so + rr * 16u + 8u * hf + c] * p.scale : -1.0 / 0.0;
                    mx = max(mx, sv[c]);
                }
                if (pass == 0u) {
                    mRow = max(mRow, max(mx, subgroupShuffleXor(mx, 1u)));
                } else {
                    float e[8], sum = 0.0;
                    [[unroll]] for (uint c = 0u; c < 8u; c++) {
                        e[c] = sv[c] == -1.0 / 0.0 ? 0.0 : exp(sv[c] - mRow);
                        sum += e[c];
                    }
                    lRow += sum + subgroupShuffleXor(sum, 1u);
                    vec4 e0 = vec4(e[0], e[1], e[2], e[3]) * PSC, e1 = vec4(e[4], e[5], e[6], e[7]) * PSC;
#ifdef FA_FP16
                    ps[po + rr * 4u + 2u * hf] = f16vec4(e0);
                    ps[po + rr * 4u + 2u * hf + 1u] = f16vec4(e1);
#else
                    vec4 g0 = fp16Head(e0), g1 = fp16Head(e1);
                    vec4 r0 = e0 - g0, r1 = e1 - g1;
                    ps[po + rr * 4u + 2u * hf] = f16vec4(g0);
                    ps[po + rr * 4u + 2u * hf + 1u] = f16vec4(g1);
                    pl[po + rr * 4u + 2u * hf] = f16vec4(r0);
                    pl[po + rr * 4u + 2u * hf + 1u] = f16vec4(r1);
#endif
                    subgroupMemoryBarrierShared();
                    subgroupBarrier();
                    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> pa;
                    coopMatLoad(pa, ps, po, 4u, gl_CooperativeMatrixLayoutRowMajor);
#ifndef FA_FP16
                    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> pb;
                    coopMatLoad(pb, pl, po, 4u, gl_CooperativeMatrixLayoutRowMajor);
#endif
                    [[unroll]] for (uint f = 0u; f < MAXHD / 16u; f++) {
                        if (f < nf) {
                            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> vb;
                            // B[k = position][n = dim] row-major: position k at (CH+k)*HDP, dims 16f..
                            coopMatLoad(vb, kv, (CH + js) * HDP + 4u * f, HDP, gl_CooperativeMatrixLayoutRowMajor);
                            oacc[f] = coopMatMulAdd(pa, vb, oacc[f]);
#ifndef FA_FP16
                            oacc[f] = coopMatMulAdd(pb, vb, oacc[f]);
#endif
                        }
                    }
                }
                subgroupBarrier(); // ss, ps and pl are rewritten by the next step
            }
        }
    }

    // O / 2^12 to the partials, a 16x16 fragment at a time through this subgroup's ss.
    uint stride = hd + 2u;
    [[unroll]] for (uint f = 0u; f < MAXHD / 16u; f++) {
        if (f < nf) {
            coopMatStore(oacc[f], ss, so, 16u, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint i = lane; i < 256u; i += 32u) {
                uint r = i / 16u, d = 16u * f + i % 16u, t = t0 + r / hp;
                if (t < p.M) part[((t * p.nHead + h0 + r % hp) * p.nSplit + s) * stride + 2u + d] = ss[so + i] * (1.0 / PSC);
            }
            subgroupBarrier();
        }
    }
    if (hf == 0u && tRow < p.M) {
        uint base = ((tRow * p.nHead + h0 + rr % hp) * p.nSplit + s) * stride;
        part[base] = lRow > 0.0 ? mRow : -1.0 / 0.0;
        part[base + 1u] = lRow;
    }
}
