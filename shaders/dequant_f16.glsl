// dequant_f16.glsl: H[r][:] = fp16(dequantized row row0 + r of W), `rows` rows of K elements,
// packed two a word with rows K apart. It stages a quantized weight matrix as the fp16 operand
// the cooperative matrix 2 GEMM (matmul_cm2.glsl, T_F16) loads without a decode function: on the
// H200 that kernel ran ~2x the KHR kernels, while decoding the blocks inside its loads did not
// (docs/PERF.md). One thread a 32-element unit (dq32 from dequant.glsl), packed as 4 uvec4s
// into shared memory; the workgroup then writes its 256 units' 16 KB as consecutive uvec4s, a
// lane after another (each store instruction of a subgroup one contiguous span, where a
// thread's own 4 uvec4s would put its lanes 64 bytes apart). The including shader defines one
// weight type. The fp16 rounding is the one every cooperative-matrix kernel applies to its
// weights.
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) writeonly buffer Hb { uvec4 h[]; };
layout(push_constant) uniform P {
    uint K;       // row length (elements), a multiple of the type's block
    uint rows;    // rows to stage
    uint row0;    // first row of W staged
    uint groupsX; // workgroups along x (the grid folds into y past the limit)
} p;

#define IQ_GRIDS_SHARED // i-quant codebooks in shared memory: constant arrays indexed per lane serialize
#include "dequant.glsl"

shared uvec4 packed[4u * 256u]; // the workgroup's units, 4 uvec4s each, in order

void main() {
#if defined(T_IQUANT)
    iqGridsLoad();
    barrier();
#endif
    uint lid = gl_LocalInvocationID.x;
    uint first = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.groupsX) * 256u; // the workgroup's first unit
    uint i = first + lid;
    uint units = p.K / 32u, total = p.rows * units;
    if (i < total) {
        uint r = i / units, u = i % units;
        float v[32];
        dq32((p.row0 + r) * (p.K / BLOCK_ELEMS) * BLOCK_BYTES + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint e = 8u * j;
            packed[4u * lid + j] = uvec4(packHalf2x16(vec2(v[e], v[e + 1u])), packHalf2x16(vec2(v[e + 2u], v[e + 3u])),
                                         packHalf2x16(vec2(v[e + 4u], v[e + 5u])), packHalf2x16(vec2(v[e + 6u], v[e + 7u])));
        }
    }
    barrier();
    uint words = 4u * min(256u, total - min(first, total)); // this workgroup's uvec4s
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint q = j * 256u + lid;
        if (q < words) h[4u * first + q] = packed[q];
    }
}
