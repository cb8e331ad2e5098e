// matmul_iq.glsl: matmul.glsl's product for the i-quants and MXFP4, with the codebook grids
// in shared memory (see dequant_iq.glsl): Y[t][r] (+)= sum_k W[r][k]·X[t][k] for rows r < N
// and tokens t < M. Same bindings, push constants and dispatch as matmul.glsl: one workgroup
// of 64 threads takes 64/lanes rows for up to TN tokens (TN_TOKENS 1: the decode matvec of
// the exact tier), `lanes` threads per row stride over its 32-element units (dq32), and a
// shared-memory sum ends each (row, token). Plain f32 sums of the exact dequantized weights
// times X as given (the driver rounds X to the types' activation blocks first).
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xv { vec4 x4[]; }; // xStride is a multiple of 4
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K; uint N; uint M; uint xStride; uint yStride; uint rowsPerX; uint accumulate; uint lanes;
} p;

#define IQ_GRIDS_SHARED
#include "dequant.glsl"

#ifndef TN_TOKENS
#define TN_TOKENS 8u
#endif
const uint TN = TN_TOKENS;
shared float red[TN][64];

void main() {
    iqGridsLoad();
    barrier();
    uint LANES = p.lanes, ROWS = 64u / p.lanes;
    uint tid = gl_LocalInvocationID.x;
    uint lane = tid % LANES;
    uint rowGroup = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * ROWS;
    uint r = rowGroup + tid / LANES;
    uint t0 = gl_WorkGroupID.z * TN;
    uint nt = min(TN, p.M - t0);
    float acc[TN];
    uint xrow[TN]; // tokens past M re-read the last one (computed, never written)
    [[unroll]] for (uint t = 0u; t < TN; t++) {
        acc[t] = 0.0;
        xrow[t] = min(t0 + t, p.M - 1u) * p.xStride;
    }
    if (r < p.N) {
        uint units = p.K / 32u;
        uint rowBase = r * (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
        float v[32];
        for (uint u = lane; u < units; u += LANES) {
            dq32(rowBase + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
            [[unroll]] for (uint t = 0u; t < TN; t++) {
                uint xb = (xrow[t] + u * 32u) >> 2;
                float s = 0.0;
                [[unroll]] for (uint i = 0u; i < 8u; i++) s += dot(vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]), x4[xb + i]);
                acc[t] += s;
            }
        }
    }
    [[unroll]] for (uint t = 0u; t < TN; t++) red[t][tid] = acc[t];
    barrier();
    for (uint jt = tid; jt < ROWS * TN; jt += 64u) {
        uint j = jt / TN, t = jt % TN;
        uint row = rowGroup + j;
        if (t < nt && row < p.N) {
            float sum = 0.0;
            for (uint l = 0u; l < LANES; l++) sum += red[t][j * LANES + l];
            uint o = (t0 + t) * p.yStride + row;
            y[o] = p.accumulate != 0u ? y[o] + sum : sum;
        }
    }
}
