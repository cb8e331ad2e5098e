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
// ROUTE_INSIDE (the gate and up products of a decode step, one token): every workgroup first
// chooses the token's experts from the router's logits itself, as moe_route does
// (moe_route.glsl, on the first 64 threads: the same choice and weights), takes its pair's
// expert from that choice, and the first workgroup writes ids and wts for the down products:
// the route's own stage goes (VKLLM_GPU_ROUTE_IN_EXPERTS).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 0) readonly buffer W4b { uvec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { uvec4 xq4[]; };
layout(std430, binding = 2) readonly buffer Sb { vec2 xs[]; };
layout(std430, binding = 3) writeonly buffer Yb { float y[]; };
#if defined(ROUTE_INSIDE)
layout(std430, binding = 4) writeonly buffer Ib { uint ids[]; };
layout(std430, binding = 5) readonly buffer Lb { float logits[]; };
layout(std430, binding = 6) writeonly buffer Wtb { float wts[]; };
#else
layout(std430, binding = 4) readonly buffer Ib { uint ids[]; };
#endif
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
#if defined(ROUTE_INSIDE)
    uint NE;       // the router's experts (its logits)
    uint gating;   // moe_route's: 1 softmax, 2 sigmoid, 3 softmax over the selected
    uint norm;     // 1: the selected weights divided by their sum
    float scale;   // a factor on the weights (1: none)
#endif
} p;

#ifndef NR_ROWS
#define NR_ROWS 2u
#endif
const uint NR = NR_ROWS;

#include "x8_unit.glsl"
#include "exact.glsl" // expExact, divExact: swiglu.comp's SwiGLU
#if defined(ROUTE_INSIDE)
#define R_NE p.NE
#define R_USED p.used
#define R_GATING p.gating
#define R_NORM p.norm
#define R_SCALE p.scale
#include "moe_route.glsl"
#endif

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

void main() {
#if defined(T_IQUANT)
    x8TablesLoad();
    barrier();
#endif
    uint q = gl_WorkGroupID.z;
#if defined(ROUTE_INSIDE)
    bool first = gl_WorkGroupID.x == 0u && gl_WorkGroupID.y == 0u && q == 0u;
    routeToken(0u, gl_LocalInvocationID.x, first);
    uint e = sel[q]; // every choice is in sel once routeToken returns
#else
    uint e = ids[q];
#endif
    uint wgRow0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * NR * gl_NumSubgroups;
    if (e < p.e0 || e - p.e0 >= p.ne || wgRow0 >= p.N) return; // uniform over the workgroup
    uint row0 = wgRow0 + gl_SubgroupID * NR;
    if (row0 >= p.N) return; // uniform over the subgroup (no barriers follow)
    products(q, e, row0);
}
