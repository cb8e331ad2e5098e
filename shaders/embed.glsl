// embed.glsl: X[t][:] = dequantized row ids[t] of the embedding table W (K elements a row).
// W may be one slice of a table split under the storage-buffer range: it holds rows
// rowBase..rowBase+nRows-1, and tokens whose id falls outside are left to another slice.
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 1) readonly buffer Ib { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Xb { float x[]; };
layout(push_constant) uniform P { uint K; uint M; uint nRows; uint xStride; uint rowBase; } p;

#include "dequant.glsl"

void main() {
    uint t = gl_WorkGroupID.x;
    if (t >= p.M) return;
    uint id = ids[t];
    if (id < p.rowBase || id - p.rowBase >= p.nRows) return;
    id -= p.rowBase;
    uint rowBase = id * (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
#if defined(T_F32) || defined(T_F16)
    for (uint i = gl_LocalInvocationID.x; i < p.K; i += 64u) {
#if defined(T_F32)
        x[t * p.xStride + i] = uintBitsToFloat(w[id * p.K + i]);
#else
        x[t * p.xStride + i] = f16at(2u * (id * p.K + i));
#endif
    }
#else
    float v[32];
    for (uint u = gl_LocalInvocationID.x; u < p.K / 32u; u += 64u) {
        dq32(rowBase + (u / UNITS_PER_BLOCK) * BLOCK_BYTES, u % UNITS_PER_BLOCK, v);
        [[unroll]] for (uint i = 0u; i < 32u; i++) x[t * p.xStride + u * 32u + i] = v[i];
    }
#endif
}
