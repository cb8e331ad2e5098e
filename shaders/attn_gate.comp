#version 450
// attn_gate: the gated attention's output gate, att *= sigmoid(gate), as engine/cpu
// rounds it: sigmoid(g) = 1 / (1 + e^-g) (a correctly rounded exp and division), then the product.
// The gates are the second half of each head's 2·headDim values of the query projection.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Gb { float qg[]; }; // M × 2·nHead·headDim
layout(std430, binding = 1) buffer Ab { float att[]; };         // M × nHead·headDim
layout(push_constant) uniform P { uint n; uint headDim; } p;    // n = M·nHead·headDim
#include "exact.glsl"
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (i >= p.n) return;
    uint head = i / p.headDim, j = i % p.headDim;
    precise float e = 1.0 + expExact(-qg[2u * head * p.headDim + p.headDim + j]);
    float s = divExact(1.0, e);
    precise float r = att[i] * s;
    att[i] = r;
}
