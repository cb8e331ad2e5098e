#version 450
// pack_f16: rounds m rows of k activations (k even; row t at t·xStride) to fp16, packed two a
// word, rows k apart: the fp16 operand the cooperative matrix 2 GEMM (matmul_cm2.glsl) loads
// without a decode function. One thread a word.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 1) writeonly buffer Hb { uint xh[]; };
layout(push_constant) uniform P { uint K; uint M; uint xStride; uint rowsPerGrid; } p;

void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * p.rowsPerGrid * 256u;
    uint half_ = p.K / 2u;
    if (i >= p.M * half_) return;
    uint t = i / half_, j = i % half_;
    uint src = t * p.xStride + 2u * j;
    xh[i] = packHalf2x16(vec2(x[src], x[src + 1u]));
}
