// matmul.glsl: Y[t][r] = sum_k W[r][k] * X[t][k] for rows r < N and tokens t < M, with W in
// its quantized GGUF layout (one row = K/BLOCK_ELEMS blocks). One workgroup of 64 threads
// computes 64/lanes rows for up to TN tokens: `lanes` threads per row split its units,
// then one barrier and a shared-memory sum (few, fat workgroups: barriers are costly on CPU
// implementations such as lavapipe). M = 1 is the decode matvec; M > 1 the prefill GEMM. F32 and F16 rows may
// have any length (threads stride over elements instead of 32-element units).
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { float x[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K;        // row length (elements), a multiple of BLOCK_ELEMS
    uint N;        // rows
    uint M;        // tokens
    uint xStride;  // elements between tokens in X
    uint yStride;  // elements between tokens in Y
    uint rowsPerX; // rows per workgroup-grid line (gl_NumWorkGroups.x)
    uint accumulate; // 1: Y += W*X, 0: Y = W*X
    uint lanes;    // threads per row, a power of two <= 64; rows per workgroup = 64/lanes
} p;

#include "dequant.glsl"

#ifndef TN_TOKENS
#define TN_TOKENS 8u
#endif
const uint TN = TN_TOKENS; // tokens per workgroup (1: the decode matvec variant)
shared float red[TN][64];

void main() {
    uint LANES = p.lanes, ROWS = 64u / p.lanes;
    uint tid = gl_LocalInvocationID.x;
    uint lane = tid % LANES;
    uint r = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * ROWS + tid / LANES;
    uint t0 = gl_WorkGroupID.z * TN;
    uint nt = min(TN, p.M - t0);
    float acc[TN];
    uint xrow[TN]; // tokens past M re-read the last token (computed, never written)
    [[unroll]] for (uint t = 0u; t < TN; t++) {
        acc[t] = 0.0;
        xrow[t] = min(t0 + t, p.M - 1u) * p.xStride;
    }
    if (r < p.N) {
#if defined(T_F32) || defined(T_F16)
        uint rowElem = r * p.K;
        for (uint i = lane; i < p.K; i += LANES) {
#if defined(T_F32)
            float wv = uintBitsToFloat(w[rowElem + i]);
#else
            float wv = f16at(2u * (rowElem + i));
#endif
            [[unroll]] for (uint t = 0u; t < TN; t++) acc[t] += wv * x[xrow[t] + i];
        }
#else
        uint units = p.K / 32u;
        uint rowBase = r * (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
        float v[32];
        for (uint u = lane; u < units; u += LANES) {
            dq32(rowBase + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
            uint xo = u * 32u;
            [[unroll]] for (uint t = 0u; t < TN; t++) {
                uint xb = xrow[t] + xo;
                float s = 0.0;
                for (uint i = 0u; i < 32u; i++) s += v[i] * x[xb + i];
                acc[t] += s;
            }
        }
#endif
    }
    [[unroll]] for (uint t = 0u; t < TN; t++) red[t][tid] = acc[t];
    barrier();
    // Thread pairs (row j, token t) sum the row's LANES partials.
    for (uint jt = tid; jt < ROWS * TN; jt += 64u) {
        uint j = jt / TN, t = jt % TN;
        uint row = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * ROWS + j;
        if (t < nt && row < p.N) {
            float sum = 0.0;
            for (uint l = 0u; l < LANES; l++) sum += red[t][j * LANES + l];
            uint o = (t0 + t) * p.yStride + row;
            y[o] = p.accumulate != 0u ? y[o] + sum : sum;
        }
    }
}
