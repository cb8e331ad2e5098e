// moe_matvec.glsl: the expert product of a mixture-of-experts layer, for any number of tokens.
// Pair q = t·USED + j is token t's j-th selected expert e = ids[q] (written by moe_route on the
// device); the pair's row of Y gets that expert's matrix times the pair's input:
//   Y[q·yStride + r] = Σ_k W_e[r][k] · X[xrow·xStride + k],  r < N,
//   xrow = q (xPerPair: the down product, each pair its own input) or t (gate and up: the
//   token's normed input, shared by its USED pairs).
// W is a binding of a 3-D expert tensor holding experts e0..e0+ne-1, each N rows of K elements
// in its GGUF layout one after another; a pair whose expert lies outside the binding is left to
// the dispatch of the binding that holds it. X comes rounded as the weight type's products see
// it (quantact: Q8_0 or Q8_K blocks, as llama.cpp's CPU path pairs them), W is expanded by
// dequant.glsl's dq32 (exact), and the products are summed in f32: within a stated bound of an
// f64 reference (moe_test.go), not in llama.cpp's order.
// With pairOff (bytes, nonzero) the binding holds the up experts that far after the gate
// experts, and a workgroup takes the same NR rows of both, writing the SwiGLU of the two sums
// as swiglu.comp computes it (silu(g)·u with a correctly rounded exp and division): the
// decode step's gate, up and SwiGLU in one dispatch, equal to the three of them apart.
// A workgroup of 64 threads takes 64/LANES groups of NR rows of one pair (LANES: 16, 32 or 64,
// the fewest that cover a row's 32-element units, so short rows, such as the down product's,
// leave fewer threads idle): each thread of a group loads its units of x once for the group's
// NR rows, and a shared-memory tree over the group's lanes adds their sums (no subgroup
// operations, so it runs on both numeric tiers and every device).
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(std430, binding = 3) readonly buffer Ib { uint ids[]; };
layout(push_constant) uniform P {
    uint K;        // row length (elements, a multiple of 32)
    uint N;        // rows of one expert
    uint e0;       // first expert in the W binding
    uint ne;       // experts in the W binding
    uint used;     // pairs per token
    uint xPerPair; // 1: X row q, 0: X row q / used
    uint xStride;  // elements between X rows (a multiple of 4)
    uint yStride;  // elements between Y rows
    uint rowsPerX; // row groups per grid line (gl_NumWorkGroups.x)
    uint pairOff;  // 0, or the byte offset of the up experts in W (gate, up and SwiGLU at once)
    uint lanes;    // threads per group of NR rows: 16, 32 or 64
} p;

#define IQ_GRIDS_SHARED // i-quant grids in shared memory (dequant_iq.glsl); other types ignore it
#include "dequant.glsl"
#include "exact.glsl" // expExact, divExact: swiglu.comp's SwiGLU

const uint NR = 4u; // rows per workgroup
shared float part[2u * NR * 64u];

void main() {
#if defined(T_IQUANT)
    iqGridsLoad();
    barrier();
#endif
    uint q = gl_WorkGroupID.z;
    uint L = p.lanes;
    uint tid = gl_LocalInvocationID.x, lane = tid % L;
    uint wgRow0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * NR * (64u / L);
    uint row0 = wgRow0 + (tid / L) * NR;
    uint e = ids[q];
    if (e < p.e0 || e - p.e0 >= p.ne || wgRow0 >= p.N) return; // uniform over the workgroup
    uint rowBytes = (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
    uint base = (e - p.e0) * p.N * rowBytes;
    uint xrow = p.xPerPair != 0u ? q : q / p.used;
    uint xBase = xrow * p.xStride / 4u;
    uint units = p.K / 32u;
    bool paired = p.pairOff != 0u; // uniform
    uint halves = paired ? 2u : 1u;
    float acc[NR], accU[NR]; // the gate (or only) rows' sums, the up rows'
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        acc[r] = 0.0;
        accU[r] = 0.0;
    }
    for (uint u = lane; u < units && row0 < p.N; u += L) {
        vec4 xv[8];
        [[unroll]] for (uint i = 0u; i < 8u; i++) xv[i] = x4[xBase + 8u * u + i];
        uint blk = (u / UNITS_PER_BLOCK) * BLOCK_BYTES, sub = u % UNITS_PER_BLOCK;
        [[dont_unroll]] for (uint hf = 0u; hf < halves; hf++) { // one copy of dq32's code per row
            uint hb = base + hf * p.pairOff;
            [[unroll]] for (uint r = 0u; r < NR; r++) {
                uint row = min(row0 + r, p.N - 1u); // a row past the end re-reads the last (never written)
                float v[32];
                dq32(hb + row * rowBytes + blk, sub, v);
                float s = 0.0;
                [[unroll]] for (uint i = 0u; i < 8u; i++) s += dot(vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]), xv[i]);
                if (hf == 0u) acc[r] += s; else accU[r] += s;
            }
        }
    }
    [[unroll]] for (uint r = 0u; r < NR; r++) {
        part[r * 64u + tid] = acc[r];
        part[(NR + r) * 64u + tid] = accU[r];
    }
    barrier();
    for (uint s = L >> 1; s > 0u; s >>= 1) {
        if (lane < s) {
            [[unroll]] for (uint r = 0u; r < 2u * NR; r++) part[r * 64u + tid] += part[r * 64u + tid + s];
        }
        barrier();
    }
    uint first = tid - lane; // the group's lane 0
    if (lane < NR && row0 + lane < p.N) {
        float g = part[lane * 64u + first];
        if (paired) {
            float u = part[(NR + lane) * 64u + first];
            precise float e = 1.0 + expExact(-g);
            float sg = divExact(g, e);
            precise float r = sg * u;
            g = r;
        }
        y[q * p.yStride + row0 + lane] = g;
    }
}
