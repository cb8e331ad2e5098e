// matvec_norm_f32.glsl: normedRow, one row of W·RMSNorm(x)·g for one token with f32 weights
// (matvec_norm_f32.comp says how; router_route_f32.comp routes after it). The includer declares
// w4, x4 and g4 and the push constants p.K and p.eps, and may define NORM_XMAX (the vec4s of x
// kept in shared memory; 960 by default) to leave shared memory for its own use.
#ifndef NORM_XMAX
#define NORM_XMAX 960u
#endif
const uint NORM_THREADS = 128u; // the workgroup's (local_size_x)
const uint NORM_UNROLL = 8u;    // a lane's loads in flight
// vec4s of x kept in shared memory (wider rows read x4): by default K <= 3840, within Vulkan's
// least 16 KB of shared memory with part
shared vec4 xs[NORM_XMAX];
shared float part[NORM_THREADS];

// normedRow returns row `row`'s product (the subgroup's sum, in every lane; 0 for a row at or
// past n). Every thread of the workgroup calls it (one barrier).
float normedRow(uint row, uint n) {
    uint tid = gl_LocalInvocationID.x, k4 = p.K / 4u;
    bool kept = k4 <= NORM_XMAX; // uniform
    float ss = 0.0;
    for (uint i0 = tid; i0 < k4; i0 += 4u * NORM_THREADS) {
        vec4 v[4];
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint i = i0 + NORM_THREADS * j;
            v[j] = i < k4 ? x4[i] : vec4(0.0);
        }
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint i = i0 + NORM_THREADS * j;
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
    for (uint i0 = lane; i0 < k4; i0 += NORM_UNROLL * lanes) {
        vec4 wv[NORM_UNROLL], gv[NORM_UNROLL];
        [[unroll]] for (uint j = 0u; j < NORM_UNROLL; j++) {
            uint i = min(i0 + j * lanes, k4 - 1u); // past the row's end: re-read its last (never added)
            wv[j] = w4[row * k4 + i];
            gv[j] = g4[i];
        }
        [[unroll]] for (uint j = 0u; j < NORM_UNROLL; j++) {
            uint i = i0 + j * lanes;
            if (i < k4) acc += dot(wv[j], (kept ? xs[i] : x4[i]) * scale * gv[j]);
        }
    }
    return subgroupAdd(acc);
}

