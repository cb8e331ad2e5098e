#version 450
// rmsnorm_fast: the fast tier's RMSNorm, Y[t][i] = X[t][i] · g[i] / sqrt(mean(X[t]^2) + eps),
// in plain f32 (the exact tier's rmsnorm.comp keeps llama.cpp's CPU rounding). One workgroup
// per token row of 512 threads: a decode step normalizes one row, so its loads must all be in
// flight at once (16-byte loads where the row and its stride allow, each thread keeping what it
// read for the second pass); subgroup sums, then one shared-memory pass over the subgroups.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 512) in;
layout(std430, binding = 0) readonly buffer Xb { float x[]; };
layout(std430, binding = 0) readonly buffer Xv { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer Gb { float g[]; };
layout(std430, binding = 1) readonly buffer Gv { vec4 g4[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(std430, binding = 2) writeonly buffer Yv { vec4 y4[]; };
layout(push_constant) uniform P { uint n; uint M; uint stride; float eps; } p;
shared float part[128];

const uint T = 512u;
const uint HOLD = 4u; // vec4s a thread keeps in registers (rows up to 8192 elements)

float total(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) part[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++) s += part[i];
    return s;
}

void main() {
    uint t = gl_WorkGroupID.x;
    if (t >= p.M) return;
    uint tid = gl_LocalInvocationID.x;
    uint base = t * p.stride;
    if (p.n % 4u == 0u && p.stride % 4u == 0u && p.n <= 4u * T * HOLD) {
        uint n4 = p.n / 4u, b4 = base / 4u;
        vec4 v[HOLD];
        float ss = 0.0;
        [[unroll]] for (uint k = 0u; k < HOLD; k++) {
            uint i = tid + k * T;
            v[k] = i < n4 ? x4[b4 + i] : vec4(0.0);
            ss += dot(v[k], v[k]);
        }
        float scale = inversesqrt(total(ss) / float(p.n) + p.eps);
        [[unroll]] for (uint k = 0u; k < HOLD; k++) {
            uint i = tid + k * T;
            if (i < n4) y4[b4 + i] = v[k] * scale * g4[i];
        }
        return;
    }
    float ss = 0.0;
    for (uint i = tid; i < p.n; i += T) ss += x[base + i] * x[base + i];
    float scale = inversesqrt(total(ss) / float(p.n) + p.eps);
    for (uint i = tid; i < p.n; i += T) y[base + i] = x[base + i] * scale * g[i];
}
