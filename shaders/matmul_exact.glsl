// matmul_exact.glsl: the exact prefill GEMM for Q4_0 and Q8_0 weights. Y[t][r] (+)= W[r]·X[t]
// summed in llama.cpp's CPU order, bit for bit (see matmul.glsl's T_Q4_0/T_Q8_0 notes), for
// many tokens at once: a workgroup of 128 threads computes a tile of 64 rows × 32 tokens and
// walks K one 32-block at a time. Per block, the tile's activations are rounded back to their
// Q8_0 integers once (X holds q·d_x with max |q| = 127, so d_x and q are recovered exactly)
// and the tile's weight blocks unpacked once, both into shared memory as small integers held
// in floats; then each thread forms the block sums of its micro-tile of 4 rows × 4 tokens with
// float multiply-adds, which are exact (every partial sum is an integer below 2^17), and folds
// them into its chains with one rounding per fused multiply-add (fma() where the
// implementation fuses it, else exact.glsl's fmaExact), block after block, in llama.cpp's order:
//   Q4_0: one chain per output: acc = fma(float(s), d_w·d_x, acc).
//   Q8_0: eight lane chains per output: lane_l = fma(d_w·d_x, s_l, lane_l), s_l the sum of
//         products 4l..4l+3; then ((l4+l0)+(l6+l2)) + ((l5+l1)+(l7+l3)).
// Block u+1 is read from memory while block u is multiplied. Rows past N and tokens past M are
// computed from clamped (valid) addresses and never written.
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { float x[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K;          // row length (elements), a multiple of 32
    uint N;          // rows
    uint M;          // tokens
    uint xStride;    // elements between tokens in X
    uint yStride;    // elements between tokens in Y
    uint accumulate; // 1: Y += W·X, 0: Y = W·X
    float probe;     // 1 + 2^-12: its square is not a float, so fma(probe, probe, -probe²) != 0
                     // exactly where fma() is fused
} p;

#include "dequant.glsl"
#include "exact.glsl"

const uint TT = 32u; // tokens per tile
const uint TR = 64u; // rows per tile
const uint MR = 4u;  // rows per thread
const uint MT = 4u;  // tokens per thread
#if defined(T_Q4_0)
const uint WQ = 2u;  // weight words a staging thread reads per block (half the row's block)
#else
const uint WQ = 4u;
#endif

// One 32-block of the tile: element k of row r at wsh[k][r], of token t at xsh[k][t/4][t%4]
// (rows of 40 floats: the staging stores of a subgroup then fall in distinct banks).
shared vec4 wsh[32][TR / 4u];
shared vec4 xsh[32][TT / 4u + 2u];
shared float dwsh[TR];   // d_w of the tile's rows
shared float dxsh[TT];   // d_x of the tile's tokens
shared vec4 pmax[2][TT]; // per token, the four staging threads' max |x| (double-buffered)

// Staging roles. Activations: four threads per token, thread part p holding elements 4i + p
// (i < 8), so a subgroup's loads cover whole 16-byte runs. Weights: two threads per row, each
// half the block's bytes (Q4_0: 8 nibble bytes, Q8_0: 16 values).
struct Stage {
    uint xrow, xt, xpart; // token row offset in X, token slot, part
    uint wrowBase, wr, wpart;
};

// loadX reads this thread's 8 activations of block u.
void loadX(Stage g, uint u, out float xr[8]) {
    uint xb = g.xrow + u * 32u + g.xpart;
    [[unroll]] for (uint i = 0u; i < 8u; i++) xr[i] = x[xb + 4u * i];
}

float partMax(float xr[8]) {
    float m = 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) m = max(m, abs(xr[i]));
    return m;
}

// storeX rounds the thread's activations back to their Q8_0 integers with the block's max |x|
// (= 127·d_x exactly) from the four partial maxima; part 0 stores d_x.
void storeX(Stage g, float xr[8], vec4 pm) {
    float maxy = max(max(pm.x, pm.y), max(pm.z, pm.w));
    float inv = maxy > 0.0 ? 127.0 / maxy : 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) xsh[4u * i + g.xpart][g.xt >> 2][g.xt & 3u] = roundEven(xr[i] * inv);
    if (g.xpart == 0u) dxsh[g.xt] = roundHalf(maxy / 127.0);
}

// loadW reads this thread's half of the weight bytes of block u (wq) and the block's f16
// scale bits.
void loadW(Stage g, uint u, out uint wq[WQ], out uint dbits) {
    uint base = g.wrowBase + u * BLOCK_BYTES + 2u + 4u * WQ * g.wpart;
    [[unroll]] for (uint i = 0u; i < WQ; i++) wq[i] = load4(base + 4u * i);
    dbits = u16(g.wrowBase + u * BLOCK_BYTES);
}

void storeW(Stage g, uint wq[WQ], uint dbits) {
    [[unroll]] for (uint i = 0u; i < WQ; i++) {
        [[unroll]] for (uint b = 0u; b < 4u; b++) {
            uint j = 4u * WQ * g.wpart + 4u * i + b;
#if defined(T_Q4_0)
            // Byte j of the 16 nibble bytes: elements j (low nibble) and j+16 (high), minus 8.
            uint q = (wq[i] >> (8u * b)) & 0xffu;
            wsh[j][g.wr >> 2][g.wr & 3u] = float(int(q & 0xfu) - 8);
            wsh[j + 16u][g.wr >> 2][g.wr & 3u] = float(int(q >> 4) - 8);
#else
            wsh[j][g.wr >> 2][g.wr & 3u] = float(int(wq[i] << (24u - 8u * b)) >> 24);
#endif
        }
    }
    if (g.wpart == 0u) dwsh[g.wr] = unpackHalf2x16(dbits).x;
}

// chainFMA is a·b + c rounded once: fma() where the implementation fuses it (a single
// instruction on GPUs), else fmaExact's emulation from plain operations (lavapipe).
float chainFMA(float a, float b, float c, bool fused) {
    if (fused) {
        precise float r = fma(a, b, c);
        return r;
    }
    return fmaExact(a, b, c);
}

void gemm(bool fused) {
    uint tid = gl_LocalInvocationID.x;
    uint row0 = gl_WorkGroupID.x * TR, tok0 = gl_WorkGroupID.y * TT;
    uint units = p.K / 32u;
    Stage g;
    g.xt = tid / 4u;
    g.xpart = tid % 4u;
    g.xrow = min(tok0 + g.xt, p.M - 1u) * p.xStride;
    g.wr = tid % TR;
    g.wpart = tid / TR;
    g.wrowBase = min(row0 + g.wr, p.N - 1u) * units * BLOCK_BYTES;
    // Compute role: rows MR·tr.., tokens MT·tt.. of the tile (consecutive threads take
    // consecutive rows: measured faster on an H200 than consecutive tokens).
    uint tr = tid % (TR / MR), tt = tid / (TR / MR);

#if defined(T_Q4_0)
    float acc[MR * MT];
    [[unroll]] for (uint o = 0u; o < MR * MT; o++) acc[o] = 0.0;
#else
    float L[MR * MT][8];
    [[unroll]] for (uint o = 0u; o < MR * MT; o++) {
        [[unroll]] for (uint l = 0u; l < 8u; l++) L[o][l] = 0.0;
    }
#endif

    // Software pipeline: block u+1 is read from memory while block u is multiplied; two
    // barriers per block (staged tile ready; tile consumed and next partial maxima ready).
    float xr[8];
    uint wq[WQ], dbits;
    loadX(g, 0u, xr);
    loadW(g, 0u, wq, dbits);
    pmax[0][g.xt][g.xpart] = partMax(xr);
    storeW(g, wq, dbits);
    barrier();
    for (uint u = 0u; u < units; u++) {
        storeX(g, xr, pmax[u & 1u][g.xt]);
        barrier();
        bool next = u + 1u < units;
        if (next) {
            loadX(g, u + 1u, xr);
            loadW(g, u + 1u, wq, dbits);
        }

#if defined(T_Q4_0)
        float s[MR * MT];
        [[unroll]] for (uint o = 0u; o < MR * MT; o++) s[o] = 0.0;
        [[unroll]] for (uint k = 0u; k < 32u; k++) {
            vec4 a = wsh[k][tr];
            vec4 b = xsh[k][tt];
            [[unroll]] for (uint i = 0u; i < MR; i++) {
                [[unroll]] for (uint j = 0u; j < MT; j++) s[i * MT + j] += a[i] * b[j]; // exact integers
            }
        }
        [[unroll]] for (uint i = 0u; i < MR; i++) {
            float dw = dwsh[MR * tr + i];
            [[unroll]] for (uint j = 0u; j < MT; j++) {
                float d = dw * dxsh[MT * tt + j]; // exact: two f16 values
                acc[i * MT + j] = chainFMA(s[i * MT + j], d, acc[i * MT + j], fused);
            }
        }
#else
        float d[MR * MT];
        [[unroll]] for (uint i = 0u; i < MR; i++) {
            [[unroll]] for (uint j = 0u; j < MT; j++) d[i * MT + j] = dwsh[MR * tr + i] * dxsh[MT * tt + j];
        }
        [[unroll]] for (uint l = 0u; l < 8u; l++) {
            float s[MR * MT];
            [[unroll]] for (uint o = 0u; o < MR * MT; o++) s[o] = 0.0;
            [[unroll]] for (uint kk = 0u; kk < 4u; kk++) {
                vec4 a = wsh[4u * l + kk][tr];
                vec4 b = xsh[4u * l + kk][tt];
                [[unroll]] for (uint i = 0u; i < MR; i++) {
                    [[unroll]] for (uint j = 0u; j < MT; j++) s[i * MT + j] += a[i] * b[j]; // exact integers
                }
            }
            [[unroll]] for (uint o = 0u; o < MR * MT; o++) L[o][l] = chainFMA(d[o], s[o], L[o][l], fused);
        }
#endif
        if (next) pmax[(u + 1u) & 1u][g.xt][g.xpart] = partMax(xr);
        barrier();
        if (next) storeW(g, wq, dbits);
    }

    [[unroll]] for (uint i = 0u; i < MR; i++) {
        uint r = row0 + MR * tr + i;
        [[unroll]] for (uint j = 0u; j < MT; j++) {
            uint t = tok0 + MT * tt + j;
            if (r < p.N && t < p.M) {
#if defined(T_Q4_0)
                float v = acc[i * MT + j];
#else
                uint o = i * MT + j;
                precise float t0 = L[o][4] + L[o][0];
                precise float t1 = L[o][5] + L[o][1];
                precise float t2 = L[o][6] + L[o][2];
                precise float t3 = L[o][7] + L[o][3];
                precise float v = (t0 + t2) + (t1 + t3);
#endif
                uint yo = t * p.yStride + r;
                y[yo] = p.accumulate != 0u ? y[yo] + v : v;
            }
        }
    }
}

void main() {
    // Whether fma() is fused here, from a product that is not a float: the flag is uniform and
    // the optimizer compiles gemm once for each value.
    precise float sq = p.probe * p.probe;
    precise float err = fma(p.probe, p.probe, -sq);
    if (err != 0.0) {
        gemm(true);
    } else {
        gemm(false);
    }
}
