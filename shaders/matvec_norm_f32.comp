#version 450
// matvec_norm_f32: y = W·RMSNorm(x)·g for one token with f32 weights, the norm computed in
// every workgroup (x is a few KB): the mixture-of-experts router of a decode step reads the
// residual stream itself, so the step has no RMSNorm stage before it. Each workgroup sums the
// squares of x (rmsnorm_fast's formula: scale = 1/sqrt(mean(x²) + eps), x·scale·g, in f32), then
// each of its subgroups takes one row: lanes stride over the row's vec4s, a subgroup sum ends
// it. K is a multiple of 4.
//
// The kernel is latency, not bandwidth: a router is 128-256 rows (0.5-2 MB) over 32-64
// workgroups, so each subgroup's loads are issued in batches of UNROLL before any is used (one
// trip to memory a batch where a loop that used each load at once made 16 in series on a
// 2048-wide row), and x, read once for the squares, is kept in shared memory for the rows. Each
// lane adds its vec4s in the same order as the loop that used each load at once.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) readonly buffer Gb { vec4 g4[]; };
layout(std430, binding = 3) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform P { uint K; uint N; float eps; } p;

const uint THREADS = 128u; // the workgroup's
const uint UNROLL = 8u;    // a lane's loads in flight
// vec4s of x kept in shared memory (wider rows read x4): K <= 3840, within Vulkan's least
// 16 KB of shared memory with part
const uint XMAX = 960u;
shared vec4 xs[XMAX];
shared float part[THREADS];

// normedRow returns row `row`'s product (the subgroup's sum, in every lane; 0 for a row at or
// past n). Every thread of the workgroup calls it (one barrier).
float normedRow(uint row, uint n) {
    uint tid = gl_LocalInvocationID.x, k4 = p.K / 4u;
    bool kept = k4 <= XMAX; // uniform
    float ss = 0.0;
    for (uint i0 = tid; i0 < k4; i0 += 4u * THREADS) {
        vec4 v[4];
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint i = i0 + THREADS * j;
            v[j] = i < k4 ? x4[i] : vec4(0.0);
        }
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint i = i0 + THREADS * j;
            if (i < k4) {
                ss += dot(v[j], v[j]);
                if (kept) xs[i] = v[j];
            }
        }
    }
    ss = subgroupAdd(ss);
    if (subgroupElect()) part[gl_SubgroupID] = ss;
    barrier(); // part and xs are written
    float total = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; g++) total += part[g];
    float scale = inversesqrt(total / float(p.K) + p.eps);
    if (row >= n) return 0.0; // uniform over the subgroup
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    float acc = 0.0;
    for (uint i0 = lane; i0 < k4; i0 += UNROLL * lanes) {
        vec4 wv[UNROLL], gv[UNROLL];
        [[unroll]] for (uint j = 0u; j < UNROLL; j++) {
            uint i = min(i0 + j * lanes, k4 - 1u); // past the row's end: re-read its last (never added)
            wv[j] = w4[row * k4 + i];
            gv[j] = g4[i];
        }
        [[unroll]] for (uint j = 0u; j < UNROLL; j++) {
            uint i = i0 + j * lanes;
            if (i < k4) acc += dot(wv[j], (kept ? xs[i] : x4[i]) * scale * gv[j]);
        }
    }
    return subgroupAdd(acc);
}

void main() {
    uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    float acc = normedRow(row, p.N);
    if (row < p.N && subgroupElect()) y[row] = acc;
}
