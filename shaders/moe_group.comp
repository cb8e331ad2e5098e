#version 450
// moe_group: groups a window's (token, slot) pairs by the expert moe_route chose for them, for
// the grouped expert products (moe_gemm.glsl). From ids[q] (q < pairs) it writes
//   sorted: the pairs of expert 0 in increasing order, then those of expert 1, ...;
//   tiles[0] = the number of tiles, then per tile (expert, first index into sorted, pairs),
//   each expert's pairs cut into tiles of at most TM, experts in increasing order.
// Pairs with an id past NE are left out. One workgroup: the counts are shared-memory atomics;
// each expert's first pair and first tile come from a scan of the counts over the experts.
// Up to SORT_MAX pairs, the pairs are ordered by a bitonic sort in shared memory of the keys
// (expert << 13 | pair), which are all distinct, so the grouping (and every product after it)
// is the same on every run; past SORT_MAX a thread of each expert gathers its pairs in order.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Ib { uint ids[]; };
layout(std430, binding = 1) writeonly buffer Tb { uint tiles[]; };
layout(std430, binding = 2) writeonly buffer Sb { uint sorted[]; };
layout(push_constant) uniform P { uint pairs; uint NE; uint TM; } p;

const uint NT = 256u;
const uint SORT_MAX = 4096u; // keys of 13 bits of pair index
const uint MAX_EXPERTS = 512u;

shared uint keys[SORT_MAX];
shared uint cnt[MAX_EXPERTS];  // pairs of each expert
shared uint off[MAX_EXPERTS];  // inclusive scan of cnt
shared uint toff[MAX_EXPERTS]; // inclusive scan of the tiles of each expert
shared uint carry[2u * MAX_EXPERTS];

void main() {
    uint tid = gl_LocalInvocationID.x;
    for (uint e = tid; e < MAX_EXPERTS; e += NT) cnt[e] = 0u;
    barrier();
    bool sorting = p.pairs <= SORT_MAX;
    uint n = 2u;
    while (n < p.pairs) n <<= 1;
    if (sorting) {
        for (uint q = tid; q < n; q += NT) {
            uint e = q < p.pairs ? ids[q] : 0xFFFFFFFFu;
            if (e < p.NE) {
                keys[q] = (e << 13) | q;
                atomicAdd(cnt[e], 1u);
            } else {
                keys[q] = 0xFFFFFFFFu;
            }
        }
    } else {
        for (uint q = tid; q < p.pairs; q += NT) {
            uint e = ids[q];
            if (e < p.NE) atomicAdd(cnt[e], 1u);
        }
    }
    barrier();
    // Inclusive scans of the pair and tile counts over the experts (Hillis-Steele).
    for (uint e = tid; e < MAX_EXPERTS; e += NT) {
        off[e] = cnt[e];
        toff[e] = (cnt[e] + p.TM - 1u) / p.TM;
    }
    barrier();
    for (uint d = 1u; d < MAX_EXPERTS; d <<= 1) {
        for (uint e = tid; e < MAX_EXPERTS; e += NT) {
            carry[2u * e] = e >= d ? off[e - d] : 0u;
            carry[2u * e + 1u] = e >= d ? toff[e - d] : 0u;
        }
        barrier();
        for (uint e = tid; e < MAX_EXPERTS; e += NT) {
            off[e] += carry[2u * e];
            toff[e] += carry[2u * e + 1u];
        }
        barrier();
    }
    if (tid == 0u) tiles[0] = toff[MAX_EXPERTS - 1u];
    for (uint e = tid; e < p.NE; e += NT) {
        uint c = cnt[e], first = off[e] - c, t = toff[e] - (c + p.TM - 1u) / p.TM;
        for (uint s = 0u; s < c; s += p.TM) {
            tiles[1u + 3u * t] = e;
            tiles[2u + 3u * t] = first + s;
            tiles[3u + 3u * t] = min(p.TM, c - s);
            t++;
        }
    }
    if (!sorting) {
        for (uint e = tid; e < p.NE; e += NT) {
            uint o = off[e] - cnt[e];
            for (uint q = 0u; cnt[e] != 0u && q < p.pairs; q++) {
                if (ids[q] == e) {
                    sorted[o] = q;
                    o++;
                }
            }
        }
        return;
    }
    // Bitonic sort of the n keys, ascending: pairs without an expert (all ones) go last.
    for (uint k = 2u; k <= n; k <<= 1) {
        for (uint j = k >> 1; j > 0u; j >>= 1) {
            for (uint i = tid; i < n / 2u; i += NT) {
                uint lo = ((i & ~(j - 1u)) << 1) | (i & (j - 1u)), hi = lo | j;
                uint a = keys[lo], b = keys[hi];
                if ((a > b) == ((lo & k) == 0u)) {
                    keys[lo] = b;
                    keys[hi] = a;
                }
            }
            barrier();
        }
    }
    uint total = off[MAX_EXPERTS - 1u];
    for (uint i = tid; i < total; i += NT) sorted[i] = keys[i] & 0x1FFFu;
}
