// matmul_cm2.glsl: the prefill GEMM on NVIDIA's cooperative matrix 2 (GL_NV_cooperative_matrix2).
// Y[t][r] (+)= sum_k W[r][k] * X[t][k], as C = A·B with A = W (rows x K, GGUF blocks), B[k][t] =
// X[t][k] and C (rows x tokens), the same contract as matmul_coopmat.glsl.
//
// The matrices are workgroup-scope: the driver stages them through shared memory and splits
// the products among the subgroups itself. Weights load through a tensor layout whose blocks
// are the weight type's blocks, decoded per element by this file's decode functions (fp16 out),
// so no pass dequantizes them first. Activations load as fp16 packed by pack_f16 (CM2_XH, rows
// K apart: the engine's kernels) or as fp32 through a one-element decode to fp16 (a benchmark
// candidate: measured slower); the accumulator is fp32. Rows past N, tokens past M read as zero
// (constant clamp) and their stores are dropped. The including shader defines one weight type
// (T_Q4_0, T_Q8_0, T_Q4_K, T_Q5_K, T_Q6_K or T_F16) and may override the tile (CM2_BM rows x
// CM2_BN tokens, CM2_BK deep; K must be a multiple of the type's block and of CM2_BK, which
// MatMulF16X checks). The per-element decode of quantized blocks is what keeps those types
// slower here than on the KHR kernels (docs/PERF.md, session 8): only F16 takes cm2 by default.
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef CM2_BM
#define CM2_BM 128
#endif
#ifndef CM2_BN
#define CM2_BN 128
#endif
#ifndef CM2_BK
#define CM2_BK 32
#endif
#ifndef CM2_UNROLL
#define CM2_UNROLL 8
#endif
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
#ifdef T_F16
layout(std430, binding = 0) readonly buffer Wh { float16_t wh[]; };
#endif
#ifdef CM2_XH
layout(std430, binding = 1) readonly buffer Xh { float16_t xh[]; }; // activations already fp16
#else
layout(std430, binding = 1) readonly buffer Xb { float x[]; };
#endif
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K;          // row length (elements), a multiple of the weight block
    uint N;          // rows
    uint M;          // tokens
    uint xStride;    // elements between tokens in X
    uint yStride;    // elements between tokens in Y
    uint accumulate; // 1: Y += W*X, 0: Y = W*X
} p;

// One fp32 activation, decoded to fp16 for the B operand.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer ActRef { float v; };
float16_t decodeAct(const in ActRef a, const in uint blockCoord[2], const in uint coordInBlock[2]) {
    return float16_t(a.v);
}

// The weight blocks (GGUF layouts) and one element of each, by its index in the block.
#if defined(T_Q4_0)
const uint QK = 32u;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BlockRef { float16_t d; uint8_t qs[16]; };
float16_t decodeW(const in BlockRef b, const in uint blockCoord[2], const in uint coordInBlock[2]) {
    uint j = coordInBlock[1];
    uint q = (uint(b.qs[j & 15u]) >> ((j >> 4) << 2)) & 15u;
    return b.d * float16_t(int(q) - 8);
}
#elif defined(T_Q8_0)
const uint QK = 32u;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BlockRef { float16_t d; int8_t qs[32]; };
float16_t decodeW(const in BlockRef b, const in uint blockCoord[2], const in uint coordInBlock[2]) {
    return b.d * float16_t(b.qs[coordInBlock[1]]);
}
#elif defined(T_Q4_K) || defined(T_Q5_K)
const uint QK = 256u;
#if defined(T_Q4_K)
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BlockRef { f16vec2 dm; uint8_t scales[12]; uint8_t qs[128]; };
#else
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BlockRef { f16vec2 dm; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
#endif
float16_t decodeW(const in BlockRef b, const in uint blockCoord[2], const in uint coordInBlock[2]) {
    uint j = coordInBlock[1];
    uint is = j >> 5;          // 32-element sub-block: its 6-bit scale and min
    uint c = j >> 6, l = j & 63u;
    uint sc, mn;
    if (is < 4u) {
        sc = uint(b.scales[is]) & 63u;
        mn = uint(b.scales[is + 4u]) & 63u;
    } else {
        uint hi = uint(b.scales[is + 4u]);
        sc = (hi & 15u) | ((uint(b.scales[is - 4u]) >> 6) << 4);
        mn = (hi >> 4) | ((uint(b.scales[is]) >> 6) << 4);
    }
    uint q = (uint(b.qs[c * 32u + (l & 31u)]) >> ((l >> 5) << 2)) & 15u;
#if defined(T_Q5_K)
    q |= ((uint(b.qh[l & 31u]) >> (2u * c + (l >> 5))) & 1u) << 4;
#endif
    vec2 dm = vec2(b.dm);
    return float16_t(dm.x * float(sc) * float(q) - dm.y * float(mn));
}
#elif defined(T_Q6_K)
const uint QK = 256u;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BlockRef { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; float16_t d; };
float16_t decodeW(const in BlockRef b, const in uint blockCoord[2], const in uint coordInBlock[2]) {
    uint j = coordInBlock[1];
    uint n = j >> 7, l = j & 127u;       // half of the block, element within it
    uint quarter = l >> 5, pos = l & 31u;
    uint lo = uint(b.ql[n * 64u + pos + (quarter & 1u) * 32u]) >> ((quarter >> 1) << 2);
    uint hi = uint(b.qh[n * 32u + pos]) >> (2u * quarter);
    int q = int((lo & 15u) | ((hi & 3u) << 4)) - 32;
    return float16_t(float(b.d) * float(b.scales[n * 8u + quarter * 2u + (pos >> 4)]) * float(q));
}
#elif defined(T_F16)
const uint QK = 1u;
#else
#error "matmul_cm2.glsl: define one weight type"
#endif

const uint BM = CM2_BM, BN = CM2_BN, BK = CM2_BK;

// CM2_STEP: acc += the tile's product over K step k0, W and X loaded through layouts LW and LX
// (the clamping ones, or CM2_FAST's unclamped ones). CM2_STORE: acc (+ Y's tile with
// accumulate) stored into Y through the clamping layout ly.
#ifdef T_F16
#define CM2_LOAD_A(LW) coopMatLoadTensorNV(a, wh, 0u, sliceTensorLayoutNV(LW, r0, BM, k0, BK));
#else
#define CM2_LOAD_A(LW) coopMatLoadTensorNV(a, w, 0u, sliceTensorLayoutNV(LW, r0, BM, k0, BK), decodeW);
#endif
#ifdef CM2_XH
#define CM2_LOAD_B(LX) coopMatLoadTensorNV(b, xh, 0u, sliceTensorLayoutNV(LX, t0, BN, k0, BK), transposed);
#else
#define CM2_LOAD_B(LX) coopMatLoadTensorNV(b, x, 0u, sliceTensorLayoutNV(LX, t0, BN, k0, BK), transposed, decodeAct);
#endif
#define CM2_STEP(LW, LX) { \
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a; \
    coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> b; \
    CM2_LOAD_A(LW) \
    CM2_LOAD_B(LX) \
    acc = coopMatMulAdd(a, b, acc); \
}
#define CM2_STORE() { \
    if (p.accumulate != 0u) { \
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> prev; \
        coopMatLoadTensorNV(prev, y, 0u, sliceTensorLayoutNV(ly, t0, BN, r0, BM), transposed); \
        acc = acc + prev; \
    } \
    coopMatStoreTensorNV(acc, y, 0u, sliceTensorLayoutNV(ly, t0, BN, r0, BM), transposed); \
}

void main() {
    uint r0 = gl_WorkGroupID.x * BM;
    uint t0 = gl_WorkGroupID.y * BN;

    // W: N rows of K elements in blocks of QK; zero past the last row.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lw = setTensorLayoutBlockSizeNV(lw, 1, QK);
    lw = setTensorLayoutDimensionNV(lw, p.N, p.K);
    // X: M tokens of K elements, xStride apart; read as B (K x tokens) through a transposing view.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lx = setTensorLayoutDimensionNV(lx, p.M, p.K);
    lx = setTensorLayoutStrideNV(lx, p.xStride, 1);
    // Y: M tokens of N rows, yStride apart; C (rows x tokens) stored through the same view.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    ly = setTensorLayoutDimensionNV(ly, p.M, p.N);
    ly = setTensorLayoutStrideNV(ly, p.yStride, 1);
    tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
#if defined(CM2_FAST) && defined(T_F16) && defined(CM2_XH)
    // CM2_FAST: a tile wholly inside W and X whose rows start 16-byte aligned loads them
    // through layouts without a clamp mode, their strides rounded down to a multiple of 8
    // elements (a no-op here that tells the compiler so), CM2_UNROLL K steps at a time; the
    // result's store stays clamped. Edge tiles take the clamping loop below.
    if (r0 + BM <= p.N && t0 + BN <= p.M && (p.K & 7u) == 0u && (p.xStride & 7u) == 0u) {
        tensorLayoutNV<2> fw = createTensorLayoutNV(2);
        fw = setTensorLayoutDimensionNV(fw, p.N, p.K);
        fw = setTensorLayoutStrideNV(fw, p.K & ~7u, 1);
        tensorLayoutNV<2> fx = createTensorLayoutNV(2);
        fx = setTensorLayoutDimensionNV(fx, p.M, p.K);
        fx = setTensorLayoutStrideNV(fx, p.xStride & ~7u, 1);
        uint k0 = 0u;
        for (uint it = p.K / (BK * CM2_UNROLL); it > 0u; it--) {
            [[unroll]] for (uint j = 0u; j < CM2_UNROLL; j++) {
                CM2_STEP(fw, fx)
                k0 += BK;
            }
        }
        for (; k0 < p.K; k0 += BK) {
            CM2_STEP(fw, fx)
        }
        CM2_STORE()
        return;
    }
#endif
    for (uint k0 = 0u; k0 < p.K; k0 += BK) {
        CM2_STEP(lw, lx)
    }
    CM2_STORE()
}
