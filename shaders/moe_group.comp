#version 450
// moe_group: groups a window's (token, slot) pairs by the expert moe_route chose for them, for
// the grouped expert products (moe_gemm.glsl). From ids[q] (q < pairs) it writes
//   sorted: the pairs of expert 0 in increasing order, then those of expert 1, ...;
//   tiles[0] = the number of tiles, then per tile (expert, first index into sorted, pairs),
//   each expert's pairs cut into tiles of at most TM, experts in increasing order.
// One workgroup: the counts are shared-memory atomics, the offsets and the tile list one
// thread's walk over the experts, and each expert's pairs are gathered in order by a thread of
// its own, so the grouping (and every product after it) is the same on every run.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Ib { uint ids[]; };
layout(std430, binding = 1) writeonly buffer Tb { uint tiles[]; };
layout(std430, binding = 2) writeonly buffer Sb { uint sorted[]; };
layout(push_constant) uniform P { uint pairs; uint NE; uint TM; } p;

shared uint cnt[512];
shared uint off[512];

void main() {
    uint tid = gl_LocalInvocationID.x;
    for (uint e = tid; e < p.NE; e += 256u) cnt[e] = 0u;
    barrier();
    for (uint q = tid; q < p.pairs; q += 256u) {
        uint e = ids[q];
        if (e < p.NE) atomicAdd(cnt[e], 1u);
    }
    barrier();
    if (tid == 0u) {
        uint start = 0u, nt = 0u;
        for (uint e = 0u; e < p.NE; e++) {
            off[e] = start;
            for (uint s = 0u; s < cnt[e]; s += p.TM) {
                tiles[1u + 3u * nt] = e;
                tiles[2u + 3u * nt] = start + s;
                tiles[3u + 3u * nt] = min(p.TM, cnt[e] - s);
                nt++;
            }
            start += cnt[e];
        }
        tiles[0] = nt;
    }
    barrier();
    for (uint e = tid; e < p.NE; e += 256u) {
        if (cnt[e] == 0u) continue;
        uint o = off[e];
        for (uint q = 0u; q < p.pairs; q++) {
            if (ids[q] == e) {
                sorted[o] = q;
                o++;
            }
        }
    }
}
