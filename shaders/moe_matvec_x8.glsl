// moe_matvec_x8.glsl: the decode step's expert products on int8 dot products (moe_matvec.glsl's
// form over activations rounded by quantize_x8). Pair q = t·USED + j is token t's j-th
// selected expert e = ids[q] (written by moe_route on the device); the pair's row of Y gets
//   Y[q·yStride + r] = Σ_k W_e[r][k] · X_xrow[k],  r < N,
//   xrow = q (xPerPair: the down product, each pair its own rounded input) or t (gate and up:
//   the token's rounded input, shared by its USED pairs).
// W binds a 3-D expert tensor holding experts e0..e0+ne-1, each N rows of K elements in its
// GGUF layout one after another; a pair whose expert lies outside the binding is left to the
// dispatch of the binding that holds it. With pairOff (bytes, nonzero) the binding holds the up
// experts that far after the gate experts, and each row's gate and up sums become silu(g)·u as
// swiglu.comp computes it. A subgroup takes NR rows of one pair, its lanes striding over the
// row's 32-element units (x8_unit.glsl), a subgroup sum ending each row.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 0) readonly buffer W4b { uvec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { uvec4 xq4[]; };
layout(std430, binding = 2) readonly buffer Sb { vec2 xs[]; };
#ifdef ROUND_OUT
// ROUND_OUT (moe_matvec_x8_<type>_r, a decode step's gate, up and SwiGLU): Y is also rounded as
// quantize_x8 rounds the down products' input (32-blocks, or Q8_K's 256-blocks with q8k), into
// hq and hs in its layout, by the last workgroup to finish each block's rows (counted in
// arrivals[q·blocks + block], which it resets): no rounding stage between gate+up and down.
layout(std430, binding = 3) coherent buffer Yb { float y[]; };
layout(std430, binding = 5) writeonly buffer HQb { uint hq[]; };
layout(std430, binding = 6) writeonly buffer HSb { vec2 hs[]; };
layout(std430, binding = 7) coherent buffer Cb { uint arrivals[]; };
#else
layout(std430, binding = 3) writeonly buffer Yb { float y[]; };
#endif
layout(std430, binding = 4) readonly buffer Ib { uint ids[]; };
layout(push_constant) uniform P {
    uint K;        // row length (elements, a multiple of 32 and of the block)
    uint N;        // rows of one expert
    uint e0;       // first expert in the W binding
    uint ne;       // experts in the W binding
    uint used;     // pairs per token
    uint xPerPair; // 1: X row q, 0: X row q / used
    uint yStride;  // elements between Y rows
    uint rowsPerX; // row groups per grid line (gl_NumWorkGroups.x)
    uint pairOff;  // 0, or the byte offset of the up experts in W (gate, up and SwiGLU at once)
#ifdef ROUND_OUT
    uint q8k;      // 1: Q8_K's 256-blocks, 0: 32-blocks (N a multiple of the block)
#endif
} p;

#ifndef NR_ROWS
#define NR_ROWS 2u
#endif
const uint NR = NR_ROWS;

#include "x8_unit.glsl"
#include "exact.glsl" // expExact, divExact: swiglu.comp's SwiGLU; roundHalf, divExact: quantize_x8's rounding

// products writes rows row0.. of pair q (expert e) of Y.
void products(uint q, uint e, uint row0) {
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    uint units = p.K / 32u, nb = units / UNITS_PER_BLOCK;
    uint rowBytes = nb * BLOCK_BYTES;
    uint base = (e - p.e0) * p.N * rowBytes;
    uint xrow = p.xPerPair != 0u ? q : q / p.used;
    uint xq0 = xrow * ((units + 31u) / 32u) * 64u; // the row's rounded x: x8QuantBytes(K)/16 words
    uint xs0 = xrow * units;
    bool paired = p.pairOff != 0u; // uniform
    float acc[NR], accU[NR];
    [[unroll]] for (uint i = 0u; i < NR; i++) {
        acc[i] = 0.0;
        accU[i] = 0.0;
    }
    for (uint u = lane; u < units; u += lanes) {
        uint xi = xq0 + (u >> 5) * 64u + (u & 31u);
        uvec4 xa = xq4[xi], xb = xq4[xi + 32u];
        vec2 s = xs[xs0 + u];
        [[unroll]] for (uint i = 0u; i < NR; i++) {
            uint rb = base + min(row0 + i, p.N - 1u) * rowBytes; // a row past the end re-reads the last (never written)
            acc[i] += unitDot(rb, nb, u, xa, xb, s);
            if (paired) accU[i] += unitDot(rb + p.pairOff, nb, u, xa, xb, s);
        }
    }
    [[unroll]] for (uint i = 0u; i < NR; i++) {
        float g = subgroupAdd(acc[i]);
        if (paired) {
            float uu = subgroupAdd(accU[i]);
            precise float ex = 1.0 + expExact(-g);
            float sg = divExact(g, ex);
            precise float r = sg * uu;
            g = r;
        }
        if (subgroupElect() && row0 + i < p.N) y[q * p.yStride + row0 + i] = g;
    }
}

#ifdef ROUND_OUT
#include "last_arrival.glsl"
#include "x8_round.glsl"
shared float rMag[64], rVal[64]; // each word's (Q8_K: each 8-word group's) largest magnitude, its signed value
shared float rSum[64];           // each word's Σq

// roundBlock rounds the block of Y's pair q holding rows wgRow0.. once every workgroup of the
// block has written its rows: the last to arrive reads the block's values and writes them as
// quantize_x8 would (the same operations: a word of four values a thread, the first largest
// magnitude in element order for Q8_K). Every thread of the workgroup calls it.
void roundBlock(uint q, uint wgRow0) {
    uint tid = gl_LocalInvocationID.x;
    uint B = p.q8k != 0u ? 256u : 32u;
    uint blk = wgRow0 / B, b0 = blk * B;
    uint rowsWG = NR * gl_NumSubgroups;
    uint slot = q * (p.N / B) + blk;
    if (!lastToArrive(slot, B / rowsWG)) return; // uniform: every workgroup of the block has written
    uint words = B / 4u;      // 8 or 64, at most the workgroup's 128 threads
    bool mine = tid < words;
    uint e = b0 + 4u * tid;   // this thread's word: elements e..e+3 of the row
    uint yr = q * p.yStride;
    vec4 v = mine ? vec4(y[yr + e], y[yr + e + 1u], y[yr + e + 2u], y[yr + e + 3u]) : vec4(0.0);
    float tv, tm = x8FirstMax(v, tv);
    if (mine) {
        rMag[tid] = tm;
        rVal[tid] = tv;
    }
    barrier();
    ivec4 qv;
    float d;
    if (p.q8k != 0u) { // uniform
        // each 8-word group's first largest magnitude, then the block's over its 8 groups
        float gm = 0.0, gv = 0.0;
        if (tid < 8u) {
            gm = rMag[8u * tid];
            gv = rVal[8u * tid];
            for (uint j = 1u; j < 8u; j++) {
                if (rMag[8u * tid + j] > gm) { gm = rMag[8u * tid + j]; gv = rVal[8u * tid + j]; }
            }
        }
        barrier(); // every group has read its words
        if (tid < 8u) {
            rMag[tid] = gm;
            rVal[tid] = gv;
        }
        barrier();
        float bm = rMag[0], bv = rVal[0];
        for (uint j = 1u; j < 8u; j++) {
            if (rMag[j] > bm) { bm = rMag[j]; bv = rVal[j]; }
        }
        qv = x8RoundQ8K(v, bm, bv, d);
    } else {
        float amax = 0.0;
        [[unroll]] for (uint j = 0u; j < 8u; j++) amax = max(amax, rMag[j]);
        qv = x8Round32(v, amax, d);
    }
    if (mine) rSum[tid] = float((qv.x + qv.y) + (qv.z + qv.w));
    barrier();
    if (mine) {
        uint u = e / 32u, j = (e % 32u) / 4u;
        uint q0 = q * ((p.N / 32u + 31u) / 32u) * 256u; // the pair's words: x8QuantBytes(N) / 4
        hq[q0 + x8WordIndex(u, j)] = x8Word(qv);
        if (j == 0u) {
            float sum = 0.0;
            [[unroll]] for (uint jj = 0u; jj < 8u; jj++) sum += rSum[tid + jj];
            hs[q * (p.N / 32u) + u] = vec2(d, sum);
        }
    }
    arrivalDone(slot); // for the next layer
}
#endif

void main() {
#if defined(T_IQUANT)
    x8TablesLoad();
    barrier();
#endif
    uint q = gl_WorkGroupID.z;
    uint e = ids[q];
    uint wgRow0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * NR * gl_NumSubgroups;
    if (e < p.e0 || e - p.e0 >= p.ne || wgRow0 >= p.N) return; // uniform over the workgroup
    uint row0 = wgRow0 + gl_SubgroupID * NR;
#ifdef ROUND_OUT
    if (row0 < p.N) products(q, e, row0); // no subgroup leaves: barriers follow
    roundBlock(q, wgRow0);
#else
    if (row0 >= p.N) return; // uniform over the subgroup (no barriers follow)
    products(q, e, row0);
#endif
}
