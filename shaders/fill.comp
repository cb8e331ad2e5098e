#version 450
// fill: y[i] = value for i < n. A smoke-test kernel for the context.
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; float value; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) y[i] = p.value + float(i);
}
