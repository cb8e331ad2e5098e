// matvec_fast.glsl: the fast tier's decode product y[r] (+)= W[r]·x for one token, with x in
// f32 as it comes (no activation rounding). A subgroup takes NR rows at a time: its lanes
// stride over the row's units (a 32-element block of Q4_0/Q8_0, a 16-element slot of a
// K-quant superblock, a 32-element unit of an i-quant or MXFP4), each lane loads its unit of
// x once (16-byte loads) and multiplies it with the same unit of all NR rows, so x is read
// from cache once per NR rows instead of once per row (f32 activations are 4 bytes an
// element against the weights' 0.5-1). A subgroup sum ends each row: no shared memory, no
// barriers (but the i-quants' grids, loaded into shared memory first). Rows per workgroup come as a push constant
// and subgroups loop over them, so any subgroup size covers every row exactly once.
// Numerics: Q4_0/Q8_0 round each 32-block of x to Q8_0 first, as llama.cpp's quantized
// products do (the other types' callers round x with quantact); then plain f32 sums in lane
// order, within a stated bound of an f64 reference on the same rounded x (kernels_test.go),
// not llama.cpp's CPU order (that is the exact tier, matmul.glsl).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) buffer Yb { float y[]; };
layout(push_constant) uniform P {
    uint K;          // row length (elements)
    uint N;          // rows
    uint rowsPerWG;  // rows per workgroup
    uint rowsPerX;   // workgroups per grid line (gl_NumWorkGroups.x)
    uint accumulate; // 1: y += W·x
    uint shareRows;  // 1: all subgroups of the workgroup split K of the same NR rows (rowsPerWG = NR)
} p;

#define IQ_GRIDS_SHARED // i-quant grids in shared memory (dequant_iq.glsl); other types ignore it
#include "dequant.glsl"

#ifndef NR_ROWS
#define NR_ROWS 4u // the .comp may set 2 (see fastMatvecRows)
#endif
const uint NR = NR_ROWS; // rows per subgroup pass
#ifndef UNITS_PER_PASS
#define UNITS_PER_PASS 1u // the matvec_fast2_ kernels take 2 (Context.matvecUnits, VKLLM_GPU_MATVEC_UNITS=2)
#endif
const uint UPP = UNITS_PER_PASS; // units a lane takes per loop pass

#if defined(T_Q4_0) || defined(T_Q8_0)
// units are 32-element blocks; x of block u is x4[8u..8u+7]. The lane rounds its block of x
// to Q8_0 as llama.cpp's quantized products see it (d = f16(amax/127), q = roundEven(x/d)),
// in registers: xv becomes the integers q, sx their sum, and the block's product is scaled by
// d once.
#define UNIT_ELEMS 32u
#define ROUNDS_Q8
#include "exact.glsl" // roundHalf
float unitDot(uint rowByte, uint u, vec4 xv[8], float sx) {
#if defined(T_Q4_0)
    uint off = rowByte + 18u * u;
    uint a = off >> 2;
    uint ws[5];
    [[unroll]] for (uint i = 0u; i < 5u; i++) ws[i] = w[a + i];
    bool al = (off & 2u) == 0u;
    float d = unpackHalf2x16(al ? ws[0] : ws[0] >> 16).x;
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q = al ? (ws[i] >> 16) | (ws[i + 1u] << 16) : ws[i + 1u];
        vec4 lo = vec4(q & 0xfu, (q >> 8) & 0xfu, (q >> 16) & 0xfu, (q >> 24) & 0xfu);
        vec4 hi = vec4((q >> 4) & 0xfu, (q >> 12) & 0xfu, (q >> 20) & 0xfu, q >> 28);
        s += dot(lo, xv[i]) + dot(hi, xv[i + 4u]);
    }
    return d * (s - 8.0 * sx);
#else
    uint off = rowByte + 34u * u;
    uint a = off >> 2;
    uint ws[9];
    [[unroll]] for (uint i = 0u; i < 9u; i++) ws[i] = w[a + i];
    bool al = (off & 2u) == 0u;
    float d = unpackHalf2x16(al ? ws[0] : ws[0] >> 16).x;
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint q = al ? (ws[i] >> 16) | (ws[i + 1u] << 16) : ws[i + 1u];
        vec4 qv = vec4(int(q << 24) >> 24, int(q << 16) >> 24, int(q << 8) >> 24, int(q) >> 24);
        s += dot(qv, xv[i]);
    }
    return d * s;
#endif
}
#elif defined(T_F32) || defined(T_F16) || defined(T_BF16)
// f32, f16 and bf16 weights (a MoE router, a shared expert's gate): units are 32 elements, x as it
// comes (llama.cpp rounds nothing for f32 weights; the fast tier leaves f16 weights' x unrounded
// too, actModeFor).
#define UNIT_ELEMS 32u
float unitDot(uint rowByte, uint u, vec4 xv[8], float sx) {
    float s = 0.0;
#if defined(T_F32)
    uint a = (rowByte + 128u * u) >> 2;
    [[unroll]] for (uint i = 0u; i < 8u; i++) s += dot(vec4(uintBitsToFloat(w[a + 4u * i]), uintBitsToFloat(w[a + 4u * i + 1u]), uintBitsToFloat(w[a + 4u * i + 2u]), uintBitsToFloat(w[a + 4u * i + 3u])), xv[i]);
#elif defined(T_F16)
    uint a = (rowByte + 64u * u) >> 2;
    [[unroll]] for (uint i = 0u; i < 8u; i++) s += dot(vec4(unpackHalf2x16(w[a + 2u * i]), unpackHalf2x16(w[a + 2u * i + 1u])), xv[i]);
#else
    uint a = (rowByte + 64u * u) >> 2;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint h0 = w[a + 2u * i], h1 = w[a + 2u * i + 1u];
        s += dot(vec4(uintBitsToFloat(h0 << 16), uintBitsToFloat(h0 & 0xffff0000u), uintBitsToFloat(h1 << 16), uintBitsToFloat(h1 & 0xffff0000u)), xv[i]);
    }
#endif
    return s;
}
#elif defined(T_IQUANT)
// the i-quants and MXFP4 (dequant_iq.glsl): units are 32-element units as dq32 expands them
// (a block of IQ4_NL/MXFP4, a sub-block of the 256-element types); x of unit u is
// x4[8u..8u+7]. Activations come rounded by quantact (Q8_0 for IQ4_NL/MXFP4, Q8_K for the
// rest, as llama.cpp's CPU products see them); the product is f32 over the exact dequantized
// weights.
#define UNIT_ELEMS 32u
float unitDot(uint rowByte, uint u, vec4 xv[8], float sx) {
    float v[32];
    dq32(rowByte + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) s += dot(vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]), xv[i]);
    return s;
}
#else
// units are 16-element slots of a 256-element superblock; x of slot s of block b is
// x4[64b + 4s .. +3]
#define UNIT_ELEMS 16u
float unitDot(uint rowByte, uint idx, vec4 xv[4], float sx) {
    uint b = idx >> 4, s = idx & 15u;
    uint base = rowByte + b * BLOCK_BYTES;
    uint u = s >> 1, hf = s & 1u; // 32-element sub-block u, its half hf
    float sq = 0.0;
#if defined(T_Q4_K) || defined(T_Q5_K)
    vec2 dm = unpackHalf2x16(w[base >> 2]);
    float sc, m;
    scaleMinK4(base + 4u, u, sc, m);
    uint shift = (u & 1u) * 4u;
#if defined(T_Q4_K)
    uint ql = (base + 16u + 32u * (u >> 1) + 16u * hf) >> 2;
#else
    uint ql = (base + 48u + 32u * (u >> 1) + 16u * hf) >> 2;
    uint qh = (base + 16u + 16u * hf) >> 2;
#endif
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = (w[ql + i] >> shift) & 0x0f0f0f0fu;
#if defined(T_Q5_K)
        q4 |= ((w[qh + i] >> u) & 0x01010101u) << 4;
#endif
        sq += dot(vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24), xv[i]);
    }
    return dm.x * sc * sq - dm.y * m * sx;
#elif defined(T_Q6_K)
    uint h = u >> 2, k = u & 3u;
    uint ql = base + 64u * h + (k & 1u) * 32u + 16u * hf;
    uint qh = base + 128u + 32u * h + 16u * hf;
    float dsc = f16at(base + 208u) * float(s8(base + 192u + 8u * h + 2u * k + hf));
    uint shl = (k >> 1) * 4u, shh = 2u * k;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = ((load4(ql + 4u * i) >> shl) & 0x0f0f0f0fu) | (((load4(qh + 4u * i) >> shh) & 0x03030303u) << 4);
        sq += dot(vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24), xv[i]);
    }
    return dsc * (sq - 32.0 * sx);
#elif defined(T_Q2_K)
    uint h = u >> 2, k = u & 3u;
    uint qs = base + 16u + 32u * h + 16u * hf, sh = 2u * k;
    vec2 dm = unpackHalf2x16(load4(base + 80u));
    uint sc = b8(base + s);
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = (load4(qs + 4u * i) >> sh) & 0x03030303u;
        sq += dot(vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24), xv[i]);
    }
    return dm.x * float(sc & 0xfu) * sq - dm.y * float(sc >> 4) * sx;
#elif defined(T_Q3_K)
    uint h = u >> 2, k = u & 3u;
    uint qs = base + 32u + 32u * h + 16u * hf, hm = base + 16u * hf;
    float dsc = f16at(base + 108u) * float(q3Scale(base + 96u, s));
    uint shq = 2u * k, shh = 4u * h + k;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint q4 = ((load4(qs + 4u * i) >> shq) & 0x03030303u) | (((load4(hm + 4u * i) >> shh) & 0x01010101u) << 2);
        sq += dot(vec4(q4 & 0xffu, (q4 >> 8) & 0xffu, (q4 >> 16) & 0xffu, q4 >> 24), xv[i]);
    }
    return dsc * (sq - 4.0 * sx);
#else
#error "matvec_fast.glsl: define T_Q4_0, T_Q8_0, T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K, T_Q6_K or an i-quant (dequant_iq.glsl)"
#endif
}
#endif

const uint XV = UNIT_ELEMS / 4u;

// A grid of few rows (a 4096-row product has 512 workgroups of 8 K-quant rows: too few to keep
// an H200's memory busy) shares each workgroup's rows among its subgroups instead: they split K,
// and shared memory adds their sums (matvec_rows.glsl).
#include "matvec_rows.glsl"

void main() {
#if defined(T_IQUANT)
    iqGridsLoad();
    barrier();
#endif
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX;
    uint units = p.K / UNIT_ELEMS;
    uint rowBytes = (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
    bool share = p.shareRows != 0u;
    uint rFirst = share ? 0u : gl_SubgroupID * NR, rStep = share ? NR : gl_NumSubgroups * NR;
    uint uFirst = share ? gl_SubgroupID * lanes + lane : lane, uStep = share ? gl_NumSubgroups * lanes : lanes;
    for (uint r0 = rFirst; r0 < p.rowsPerWG; r0 += rStep) {
        uint row0 = wg * p.rowsPerWG + r0;
        if (row0 >= p.N) break;
        float acc[NR];
        [[unroll]] for (uint i = 0u; i < NR; i++) acc[i] = 0.0;
        for (uint u0 = uFirst; u0 < units; u0 += UPP * uStep) {
          [[unroll]] for (uint j = 0u; j < UPP; j++) {
            // UPP units a pass: a unit past the row's end re-reads the last and counts 0 (no
            // branch, so the compiler can issue every unit's loads before the first product)
            uint u = min(u0 + j * uStep, units - 1u);
            float live = u0 + j * uStep < units ? 1.0 : 0.0;
            vec4 xv[XV];
            float sx = 0.0;
            [[unroll]] for (uint i = 0u; i < XV; i++) xv[i] = x4[u * XV + i];
            float dx = 1.0;
#if defined(ROUNDS_Q8)
            float amax = 0.0;
            [[unroll]] for (uint i = 0u; i < XV; i++) {
                vec4 a = abs(xv[i]);
                amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
            }
            float inv = amax > 0.0 ? 127.0 / amax : 0.0;
            dx = roundHalf(amax / 127.0);
            [[unroll]] for (uint i = 0u; i < XV; i++) xv[i] = roundEven(xv[i] * inv);
#endif
            [[unroll]] for (uint i = 0u; i < XV; i++) sx += (xv[i].x + xv[i].y) + (xv[i].z + xv[i].w);
            dx *= live;
            [[unroll]] for (uint i = 0u; i < NR; i++) {
                uint r = min(row0 + i, p.N - 1u); // a past-the-end row re-reads the last (never written)
                acc[i] += dx * unitDot(r * rowBytes, u, xv, sx);
            }
          }
        }
        finishRows(acc, row0, r0, share);
    }
}
