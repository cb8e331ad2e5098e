#version 450
// kvstore: writes M rows of f32 (rowElems each) into an f16 cache at rows pos0.. (pos0 =
// pos[0]); the cache is packed two halves per uint word. rowElems must be even.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Sb { float src[]; };
layout(std430, binding = 1) buffer Cb { uint cache[]; };
layout(std430, binding = 2) readonly buffer Pb { uint pos[]; };
layout(push_constant) uniform P { uint rowElems; uint M; uint srcStride; } p;

// roundHalf rounds to f16 (ties to even) first, so packHalf2x16 (whose rounding mode is
// implementation-defined) only packs exact values.
#include "exact.glsl"
void main() {
    uint pairs = p.rowElems / 2u;
    uint idx = gl_GlobalInvocationID.x;
    if (idx >= pairs * p.M) return;
    uint t = idx / pairs, e = 2u * (idx % pairs);
    uint s = t * p.srcStride + e;
    cache[((pos[0] + t) * p.rowElems + e) / 2u] = packHalf2x16(vec2(roundHalf(src[s]), roundHalf(src[s + 1u])));
}
