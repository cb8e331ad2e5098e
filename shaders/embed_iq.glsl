// embed_iq.glsl: embed.glsl for the i-quants and MXFP4: X[t][:] = dequantized row ids[t] of
// the table W, with the codebook grids in shared memory (see dequant_iq.glsl), loaded before
// any invocation returns. Same bindings, push constants and dispatch as embed.glsl.
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Ib { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Xb { float x[]; };
layout(push_constant) uniform P { uint K; uint M; uint nRows; uint xStride; uint rowBase; } p;

#define IQ_GRIDS_SHARED
#include "dequant.glsl"

void main() {
    iqGridsLoad();
    barrier();
    uint t = gl_WorkGroupID.x;
    if (t >= p.M) return;
    uint id = ids[t];
    if (id < p.rowBase || id - p.rowBase >= p.nRows) return;
    id -= p.rowBase;
    uint rowBase = id * (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
    float v[32];
    for (uint u = gl_LocalInvocationID.x; u < p.K / 32u; u += 64u) {
        dq32(rowBase + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
        [[unroll]] for (uint i = 0u; i < 32u; i++) x[t * p.xStride + u * 32u + i] = v[i];
    }
}
