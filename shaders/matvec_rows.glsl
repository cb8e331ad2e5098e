// matvec_rows.glsl: the end of a decode product's subgroup pass over NR rows (matvec_fast.glsl,
// matvec_x8.glsl). The including shader declares y[], the push constants p.N, p.rowsPerWG and
// p.accumulate, and NR. On grids of few rows (share) the workgroup's subgroups split K of the
// same NR rows and their sums meet in shared memory (16 subgroups at most: 128 threads,
// subgroups of 8 or more); otherwise each subgroup owns its rows and a subgroup sum ends each.

shared float sgPart[16u * NR];

// finishRows writes y[row0 + i] (+)= the sum over lanes (and, with share, subgroups) of acc[i]
// for the pass's rows that exist; r0 is row0's place in the workgroup's rows. With share it
// holds barriers: every invocation of the workgroup must call it.
void finishRows(float acc[NR], uint row0, uint r0, bool share) {
    if (share) { // uniform across the workgroup
        [[unroll]] for (uint i = 0u; i < NR; i++) {
            float sum = subgroupAdd(acc[i]);
            if (subgroupElect()) sgPart[gl_SubgroupID * NR + i] = sum;
        }
        barrier();
        if (gl_LocalInvocationID.x < NR) {
            uint i = gl_LocalInvocationID.x, r = row0 + i;
            float sum = 0.0;
            for (uint g = 0u; g < gl_NumSubgroups; g++) sum += sgPart[g * NR + i];
            if (r < p.N) y[r] = p.accumulate != 0u ? y[r] + sum : sum;
        }
        barrier();
        return;
    }
    [[unroll]] for (uint i = 0u; i < NR; i++) {
        float sum = subgroupAdd(acc[i]);
        uint r = row0 + i;
        if (subgroupElect() && r < p.N && r0 + i < p.rowsPerWG) y[r] = p.accumulate != 0u ? y[r] + sum : sum;
    }
}
