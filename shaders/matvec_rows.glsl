// matvec_rows.glsl: the end of a decode product's subgroup pass over NR rows (matvec_fast.glsl,
// matvec_x8.glsl). The including shader declares y[], the push constants p.N, p.rowsPerWG and
// p.accumulate, and NR. On grids of few rows (share) the workgroup's subgroups split K of the
// same NR rows and their sums meet in shared memory (16 subgroups at most: 128 threads,
// subgroups of 8 or more); otherwise each subgroup owns its rows and a subgroup sum ends each.

shared float sgPart[16u * NR];

#ifndef STORE_ROW
// STORE_ROW ends row r with its sum (a variant may define its own end first: matvec_x8's CONV).
#define STORE_ROW(r, sum) y[r] = p.accumulate != 0u ? y[r] + sum : sum
#endif

// finishRows writes y[row0 + i] (+)= the sum over lanes (and, with share, subgroups) of acc[i]
// for the pass's rows that exist (through STORE_ROW); r0 is row0's place in the workgroup's
// rows. With share it holds barriers: every invocation of the workgroup must call it. With ROPE_KV (matvec_x8.glsl)
// the rows end in pairs through storePair instead (NR even, row0 even).
void finishRows(float acc[NR], uint row0, uint r0, bool share) {
    if (share) { // uniform across the workgroup
        [[unroll]] for (uint i = 0u; i < NR; i++) {
            float sum = subgroupAdd(acc[i]);
            if (subgroupElect()) sgPart[gl_SubgroupID * NR + i] = sum;
        }
        barrier();
#ifdef ROPE_KV
        if (gl_LocalInvocationID.x < NR / 2u) { // a pair of rows each: (row0 + 2i, row0 + 2i + 1)
            uint i = 2u * gl_LocalInvocationID.x, r = row0 + i;
            float a = 0.0, b = 0.0;
            for (uint g = 0u; g < gl_NumSubgroups; g++) {
                a += sgPart[g * NR + i];
                b += sgPart[g * NR + i + 1u];
            }
            if (r < p.N) storePair(r, a, b);
        }
#else
        if (gl_LocalInvocationID.x < NR) {
            uint i = gl_LocalInvocationID.x, r = row0 + i;
            float sum = 0.0;
            for (uint g = 0u; g < gl_NumSubgroups; g++) sum += sgPart[g * NR + i];
            if (r < p.N) STORE_ROW(r, sum);
        }
#endif
        barrier();
        return;
    }
#ifdef ROPE_KV
    float sums[NR];
    [[unroll]] for (uint i = 0u; i < NR; i++) sums[i] = subgroupAdd(acc[i]);
    if (subgroupElect()) {
        [[unroll]] for (uint i = 0u; i < NR; i += 2u) {
            uint r = row0 + i;
            if (r < p.N && r0 + i < p.rowsPerWG) storePair(r, sums[i], sums[i + 1u]);
        }
    }
#else
    [[unroll]] for (uint i = 0u; i < NR; i++) {
        float sum = subgroupAdd(acc[i]);
        uint r = row0 + i;
        if (subgroupElect() && r < p.N && r0 + i < p.rowsPerWG) STORE_ROW(r, sum);
    }
#endif
}
