// matvec_norm_f32.glsl: y = W·RMSNorm(x)·g for one token with f32 weights, the norm computed in
// every workgroup (x is a few KB), included by matvec_norm_f32.comp (128 threads) and
// matvec_norm_f32_route.comp (64, the router's product with its routing): the
// mixture-of-experts router of a decode step reads the residual stream itself, so the step has
// no RMSNorm stage before it. Each workgroup sums the squares of x (rmsnorm_fast's formula:
// scale = 1/sqrt(mean(x²) + eps), x·scale·g, in f32), then each of its subgroups takes one row:
// lanes stride over the row's vec4s, a subgroup sum ends it. K is a multiple of 4.
//
// The kernel is latency, not bandwidth: a router is 128-256 rows (0.5-2 MB) over 32-64
// workgroups, so each subgroup's loads are issued in batches of UNROLL before any is used (one
// trip to memory a batch where a loop that used each load at once made 16 in series on a
// 2048-wide row), and x, read once for the squares, is kept in shared memory for the rows. Each
// lane adds its vec4s in the same order as the loop that used each load at once.
// The including shader defines NORM_THREADS (its workgroup size), may define NORM_XMAX, and
// declares w4, x4 and g4 and push constants K and eps.

const uint UNROLL = 8u;   // a lane's loads in flight
#ifndef NORM_XMAX
#define NORM_XMAX 960u // K <= 3840: within Vulkan's least 16 KB of shared memory with part
#endif
const uint XMAX = NORM_XMAX; // vec4s of x kept in shared memory (wider rows read x4)
shared vec4 xs[XMAX];
shared float part[NORM_THREADS];

// normedRow returns row `row`'s product (the subgroup's sum, in every lane; 0 for a row at or
// past n). Every thread of the workgroup calls it (one barrier).
float normedRow(uint row, uint n) {
    uint tid = gl_LocalInvocationID.x, k4 = p.K / 4u;
    bool kept = k4 <= XMAX; // uniform
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
