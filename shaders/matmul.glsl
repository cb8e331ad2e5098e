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
// The same activations as 16-byte loads, for kernels reading whole 32-element blocks (a lane
// reading 32 floats one by one sends 32 loads 128 bytes apart from its neighbours'). Needs
// xStride a multiple of 4 (MatMul checks it).
layout(std430, binding = 1) readonly buffer Xv { vec4 x4[]; };
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

#if defined(T_Q4_0)
// Q4_0 rows are summed in llama.cpp's CPU order, bit for bit: per 32-block the exact integer
// sum s of weight nibbles (q-8) times the activation's Q8_0 values, then one running
// acc = fma(float(s), d_w·d_x, acc) over the blocks in order. A last-bit difference here
// decides how the next layer's activations round to 8 bits, and random-weight models amplify
// one such flip into logit differences of ~0.1. X must hold activations already rounded to
// Q8_0 blocks (quantact mode 2): each block's values are q·d_x with max |q| = 127, so d_x and
// the integers q are recovered exactly from the floats. Lanes compute the block sums of a
// LANES-block chunk in parallel; one thread per (row, token) folds them in order. Needs
// ROWS·TN <= 64 (lanes >= 8 for the 8-token variant).
shared float dsh[TN][64];
#include "exact.glsl"


// q4_0Block sets sv[t] to the exact integer sum of block u (at byte base) with token t's Q8_0
// values, and dv[t] to d_w·d_x (exact: a product of two f16 values).
void q4_0Block(uint base, uint u, uint xrow[TN], out float sv[TN], out float dv[TN]) {
    float dw = f16at(base);
    int qw[32];
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = load4(base + 2u + 4u * i);
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            uint q = (q4 >> (8u * b)) & 0xffu;
            qw[4u * i + b] = int(q & 0xfu) - 8;
            qw[4u * i + b + 16u] = int(q >> 4) - 8;
        }
    }
    [[unroll]] for (uint t = 0u; t < TN; t++) {
        uint xb = xrow[t] + u * 32u;
        vec4 xv[8];
        float maxy = 0.0;
        [[unroll]] for (uint i = 0u; i < 8u; i++) {
            xv[i] = x4[(xb >> 2) + i];
            vec4 a = abs(xv[i]);
            maxy = max(maxy, max(max(a.x, a.y), max(a.z, a.w)));
        }
        float inv = maxy > 0.0 ? 127.0 / maxy : 0.0;
        int s = 0;
        [[unroll]] for (uint i = 0u; i < 32u; i++) s += qw[i] * int(roundEven(xv[i >> 2][i & 3u] * inv));
        sv[t] = float(s);
        dv[t] = dw * roundHalf(maxy / 127.0); // max |y| = 127·d_x exactly
    }
}

void q4_0Chain(uint LANES, uint ROWS, uint tid, uint lane, uint r, uint t0, uint nt, uint xrow[TN]) {
    uint units = p.K / 32u;
    uint rowBase = r * units * BLOCK_BYTES;
    float sv[TN], dv[TN];
    if (LANES == 1u) { // one thread per row: fold in place, no shared memory
        float acc[TN];
        [[unroll]] for (uint t = 0u; t < TN; t++) acc[t] = 0.0;
        if (r < p.N) {
            for (uint u = 0u; u < units; u++) {
                q4_0Block(rowBase + u * BLOCK_BYTES, u, xrow, sv, dv);
                [[unroll]] for (uint t = 0u; t < TN; t++) acc[t] = fmaExact(sv[t], dv[t], acc[t]);
            }
            [[unroll]] for (uint t = 0u; t < TN; t++) {
                if (t < nt) {
                    uint o = (t0 + t) * p.yStride + r;
                    y[o] = p.accumulate != 0u ? y[o] + acc[t] : acc[t];
                }
            }
        }
        return;
    }
    uint cj = tid / TN, ct = tid % TN; // the (row, token) pair this thread folds
    bool folds = tid < ROWS * TN;
    float chain = 0.0;
    for (uint u0 = 0u; u0 < units; u0 += LANES) {
        uint u = u0 + lane;
        [[unroll]] for (uint t = 0u; t < TN; t++) { sv[t] = 0.0; dv[t] = 0.0; }
        if (r < p.N && u < units) q4_0Block(rowBase + u * BLOCK_BYTES, u, xrow, sv, dv);
        [[unroll]] for (uint t = 0u; t < TN; t++) { red[t][tid] = sv[t]; dsh[t][tid] = dv[t]; }
        barrier();
        if (folds) {
            uint n = min(LANES, units - u0);
            for (uint l = 0u; l < n; l++) chain = fmaExact(red[ct][cj * LANES + l], dsh[ct][cj * LANES + l], chain);
        }
        barrier();
    }
    uint row = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * ROWS + cj;
    if (folds && ct < nt && row < p.N) {
        uint o = (t0 + ct) * p.yStride + row;
        y[o] = p.accumulate != 0u ? y[o] + chain : chain;
    }
}
#endif

#if defined(T_Q8_0)
// Q8_0 rows are summed in llama.cpp's CPU order, bit for bit: eight float lanes, lane l taking
// per block the exact integer sum s_l of products 4l..4l+3 as lane_l = fma(d_w·d_x, s_l, lane_l),
// block after block; then (l0+l4 + l2+l6) + (l1+l5 + l3+l7). X holds Q8_0-rounded activations
// (see the Q4_0 note above: d_x and the integers are recovered exactly).
#include "exact.glsl"

// q8Scale returns d_x of the activation block at xb and sets inv to 1/d_x (0 for a zero block).
float q8Scale(uint xb, out float inv) {
    float maxy = 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        vec4 a = abs(x4[(xb >> 2) + i]);
        maxy = max(maxy, max(max(a.x, a.y), max(a.z, a.w)));
    }
    inv = maxy > 0.0 ? 127.0 / maxy : 0.0;
    return roundHalf(maxy / 127.0);
}

// q8Lane is the integer sum of products 4l..4l+3 of the weight block at base and the
// activation block at xb.
int q8Lane(uint base, uint xb, float inv, uint l) {
    uint q4 = load4(base + 2u + 4u * l);
    vec4 xv = x4[(xb >> 2) + l];
    int s = 0;
    [[unroll]] for (uint b = 0u; b < 4u; b++) {
        int qw = int(q4 << (24u - 8u * b)) >> 24;
        s += qw * int(roundEven(xv[b] * inv));
    }
    return s;
}

float fold8(float L[8]) {
    precise float t0 = L[4] + L[0];
    precise float t1 = L[5] + L[1];
    precise float t2 = L[6] + L[2];
    precise float t3 = L[7] + L[3];
    precise float r = (t0 + t2) + (t1 + t3);
    return r;
}

shared float part8[TN][64][8];
shared float dsh8[TN][64];

void q8_0Rows(uint LANES, uint ROWS, uint tid, uint lane, uint r, uint t0, uint nt, uint xrow[TN]) {
    uint units = p.K / 32u;
    uint rowBase = r * units * BLOCK_BYTES;
    if (LANES == 1u) { // one thread per row: all eight float lanes here, no shared memory
        if (r >= p.N) return;
        [[unroll]] for (uint t = 0u; t < TN; t++) {
            if (t >= nt) break;
            float L[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
            for (uint u = 0u; u < units; u++) {
                uint base = rowBase + u * BLOCK_BYTES;
                uint xb = xrow[t] + u * 32u;
                float inv;
                float d = f16at(base) * q8Scale(xb, inv); // exact: two f16 values
                [[unroll]] for (uint l = 0u; l < 8u; l++) L[l] = fmaExact(d, float(q8Lane(base, xb, inv, l)), L[l]);
            }
            float sum = fold8(L);
            uint o = (t0 + t) * p.yStride + r;
            y[o] = p.accumulate != 0u ? y[o] + sum : sum;
        }
        return;
    }
    // Lanes take the blocks of a LANES-block chunk (their eight integer sums and d_w·d_x into
    // shared memory); one thread per (row, token) folds them in order. Needs ROWS·TN <= 64.
    uint cj = tid / TN, ct = tid % TN;
    bool folds = tid < ROWS * TN;
    float L[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (uint u0 = 0u; u0 < units; u0 += LANES) {
        uint u = u0 + lane;
        bool have = r < p.N && u < units;
        uint base = rowBase + u * BLOCK_BYTES;
        float dw = have ? f16at(base) : 0.0;
        [[unroll]] for (uint t = 0u; t < TN; t++) {
            float dv = 0.0;
            if (have) {
                uint xb = xrow[t] + u * 32u;
                float inv;
                dv = dw * q8Scale(xb, inv);
                [[unroll]] for (uint l = 0u; l < 8u; l++) part8[t][tid][l] = float(q8Lane(base, xb, inv, l));
            } else {
                [[unroll]] for (uint l = 0u; l < 8u; l++) part8[t][tid][l] = 0.0;
            }
            dsh8[t][tid] = dv;
        }
        barrier();
        if (folds) {
            uint n = min(LANES, units - u0);
            for (uint b = 0u; b < n; b++) {
                uint src = cj * LANES + b;
                float d = dsh8[ct][src];
                [[unroll]] for (uint l = 0u; l < 8u; l++) L[l] = fmaExact(d, part8[ct][src][l], L[l]);
            }
        }
        barrier();
    }
    uint row = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * ROWS + cj;
    if (folds && ct < nt && row < p.N) {
        float sum = fold8(L);
        uint o = (t0 + ct) * p.yStride + row;
        y[o] = p.accumulate != 0u ? y[o] + sum : sum;
    }
}
#endif

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
#if defined(T_Q4_0)
    q4_0Chain(LANES, ROWS, tid, lane, r, t0, nt, xrow);
    return;
#elif defined(T_Q8_0)
    q8_0Rows(LANES, ROWS, tid, lane, r, t0, nt, xrow);
    return;
#endif
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
                [[unroll]] for (uint i = 0u; i < 8u; i++) s += dot(vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]), x4[(xb >> 2) + i]);
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
