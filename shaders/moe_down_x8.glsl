// moe_down_x8.glsl: a decode step's expert down products and their combine in one dispatch
// (moe_matvec_x8.glsl's down product, then moe_combine.comp's weighted sum). For the token's
// USED pairs j (expert e_j = ids[j], weight wts[j], hidden row h_j rounded by quantize_x8):
//   X[r] += Σ_j wts[j] · (W_{e_j}[r] · h_j)   (+ sigmoid(g) · S[r] with a shared expert)
// A subgroup takes NR rows; its lanes stride over a row's USED·units (pair, 32-element unit)
// products, each scaled by its pair's weight, and one subgroup sum ends each row: no lane idles
// on the short rows of an expert's down product (768 elements: 24 units), and no pass writes
// the pairs' outputs for another to read. The sums are f32 in an order of their own (the fast
// tier's; moe_combine keeps the CPU's order). W binds the whole 3-D expert tensor.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 0) readonly buffer W4b { uvec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { uvec4 xq4[]; };
layout(std430, binding = 2) readonly buffer Sb { vec2 xs[]; };
layout(std430, binding = 3) buffer Yb { float y[]; };          // the residual, added to
layout(std430, binding = 4) readonly buffer Ib { uint ids[]; };
layout(std430, binding = 5) readonly buffer Gw { float wts[]; };
layout(std430, binding = 6) readonly buffer Hb { float sh[]; }; // the shared expert's output
layout(std430, binding = 7) readonly buffer Lb { float g[]; };  // its gate logit
layout(push_constant) uniform P {
    uint K;         // row length (elements, a multiple of 32 and of the block)
    uint N;         // rows of one expert
    uint used;      // pairs of the token
    uint rowsPerX;  // row groups per grid line (gl_NumWorkGroups.x)
    uint hasShared; // 1: add sigmoid(g[0])·sh
} p;

const uint NR = 2u;

#include "x8_unit.glsl"
#include "exact.glsl" // expExact, divExact: moe_combine's sigmoid

// downRows adds rows row0.. of the combined down products to the residual.
void downRows(uint row0) {
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    uint units = p.K / 32u, nb = units / UNITS_PER_BLOCK;
    uint rowBytes = nb * BLOCK_BYTES;
    uint xWords = ((units + 31u) / 32u) * 64u; // one rounded row: x8QuantBytes(K)/16 words
    float acc[NR];
    [[unroll]] for (uint i = 0u; i < NR; i++) acc[i] = 0.0;
    uint total = p.used * units;
    for (uint t = lane; t < total; t += lanes) {
        uint j = t / units, u = t - j * units;
        uint base = ids[j] * p.N * rowBytes;
        float wj = wts[j];
        uint xi = j * xWords + (u >> 5) * 64u + (u & 31u);
        uvec4 xa = xq4[xi], xb = xq4[xi + 32u];
        vec2 s = xs[j * units + u];
        [[unroll]] for (uint i = 0u; i < NR; i++) {
            uint rb = base + min(row0 + i, p.N - 1u) * rowBytes; // a row past the end re-reads the last (never written)
            acc[i] += wj * unitDot(rb, nb, u, xa, xb, s);
        }
    }
    float sg = 0.0;
    if (p.hasShared != 0u) {
        precise float den = 1.0 + expExact(-g[0]);
        sg = divExact(1.0, den);
    }
    [[unroll]] for (uint i = 0u; i < NR; i++) {
        float v = subgroupAdd(acc[i]);
        uint r = row0 + i;
        if (subgroupElect() && r < p.N) {
            if (p.hasShared != 0u) v += sh[r] * sg;
            y[r] = y[r] + v;
        }
    }
}

void main() {
#if defined(T_IQUANT)
    x8TablesLoad();
    barrier();
#endif
    uint wgRow0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * NR * gl_NumSubgroups;
    if (wgRow0 >= p.N) return; // uniform over the workgroup
    uint row0 = wgRow0 + gl_SubgroupID * NR;
    if (row0 >= p.N) return; // uniform over the subgroup (no barriers follow)
    downRows(row0);
}
