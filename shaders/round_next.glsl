// round_next.glsl: the last workgroup of a dispatch that adds to the residual y rounds it for
// the next stage's int8 products (included under ROUND_NEXT by moe_down_x8.glsl and
// matvec_x8.glsl). The including shader declares y (coherent), ng4 (the next norm's weight),
// nq and ns (quantize_x8's layout of one row), arrivals (last_arrival.glsl's), and push constants
// N (the row's length), eps and q8k; it calls roundNext with the count of workgroups that add
// to y, after its own writes, from every thread.

#include "last_arrival.glsl"
#include "x8_round.glsl"
shared float rPart[128], rVal[128]; // a thread's largest magnitude (its signed value), later its Σq
shared float rGrp[16], rGrpV[16];   // Q8_K: each 8-thread group's
shared float rSS[128];              // the subgroups' sums of squares

// roundNext rounds the whole residual (N values) once every one of the `workgroups` has added
// its rows: the last to arrive normalizes it (rmsnorm's scale from its squares, times ng) and
// rounds it in passes of 128 vec4s, a vec4 a thread, as quantize_x8 rounds a pass (its sums
// of squares in another order: the scale may differ from quantize_x8's in the last bit). The
// workgroup has 128 threads.
void roundNext(uint workgroups) {
    uint tid = gl_LocalInvocationID.x;
    if (!lastToArrive(0u, workgroups)) return; // uniform: every workgroup has added its rows
    uint n4 = p.N / 4u;
    float ss = 0.0;
    for (uint i = tid; i < n4; i += 128u) {
        vec4 v = vec4(y[4u * i], y[4u * i + 1u], y[4u * i + 2u], y[4u * i + 3u]);
        ss += dot(v, v);
    }
    ss = subgroupAdd(ss);
    if (subgroupElect()) rSS[gl_SubgroupID] = ss;
    barrier();
    float total = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; g++) total += rSS[g];
    float scale = inversesqrt(total / float(p.N) + p.eps);
    for (uint i0 = 0u; i0 < n4; i0 += 128u) { // uniform: every thread takes every pass
        uint i = i0 + tid; // this thread's vec4: word i % 8 of block i / 8
        bool live = i < n4;
        vec4 v = vec4(0.0);
        if (live) v = vec4(y[4u * i], y[4u * i + 1u], y[4u * i + 2u], y[4u * i + 3u]) * scale * ng4[i];
        float tv;
        rPart[tid] = x8FirstMax(v, tv);
        rVal[tid] = tv;
        barrier();
        uint b0 = tid & ~7u;
        float d;
        ivec4 q;
        if (p.q8k != 0u) { // uniform
            float gm = rPart[b0], gv = rVal[b0];
            for (uint j = 1u; j < 8u; j++) {
                if (rPart[b0 + j] > gm) { gm = rPart[b0 + j]; gv = rVal[b0 + j]; }
            }
            if ((tid & 7u) == 0u) { rGrp[tid >> 3] = gm; rGrpV[tid >> 3] = gv; }
            barrier();
            uint g0 = (tid & ~63u) >> 3; // this 256-block's first group
            float bm = rGrp[g0], bv = rGrpV[g0];
            for (uint j = 1u; j < 8u; j++) {
                if (rGrp[g0 + j] > bm) { bm = rGrp[g0 + j]; bv = rGrpV[g0 + j]; }
            }
            q = x8RoundQ8K(v, bm, bv, d);
        } else {
            float amax = 0.0;
            [[unroll]] for (uint j = 0u; j < 8u; j++) amax = max(amax, rPart[b0 + j]);
            q = x8Round32(v, amax, d);
        }
        barrier(); // everyone has read the maxima
        rPart[tid] = float((q.x + q.y) + (q.z + q.w));
        barrier();
        if (live) {
            uint u = i / 8u, j = i % 8u;
            nq[x8WordIndex(u, j)] = x8Word(q);
            if (j == 0u) {
                float sum = 0.0;
                [[unroll]] for (uint jj = 0u; jj < 8u; jj++) sum += rPart[b0 + jj];
                ns[u] = vec2(d, sum);
            }
        }
        barrier(); // rPart is reused by the next pass
    }
    arrivalDone(0u); // for the next layer
}
