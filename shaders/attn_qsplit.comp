#version 450
// attn_qsplit: the gated attention's query projection holds, per head, the head's query then its
// output gate (2·headDim values); this copies the queries of M tokens into a row of nHead·headDim
// (the gates stay where they are for attn_gate).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Gb { float qg[]; }; // M × 2·nHead·headDim
layout(std430, binding = 1) writeonly buffer Qb { float q[]; }; // M × nHead·headDim
layout(push_constant) uniform P { uint n; uint headDim; } p;    // n = M·nHead·headDim
void main() {
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (i >= p.n) return;
    uint head = i / p.headDim, j = i % p.headDim; // head counts over every token's heads
    q[i] = qg[2u * head * p.headDim + j];
}
