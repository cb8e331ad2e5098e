// moe_tile_mma.glsl: the cooperative-matrix half of a grouped expert product, shared by
// moe_gemm_coopmat.glsl and moe_gemm_ahead.glsl. A subgroup owns 32 rows (FR 16-row fragments)
// from row sr of the workgroup's tile and BN/2 pairs (FC 16-pair fragments) from pair st.
//
// The including shader declares sa (weights, row-major, row r at r*SK4) and sb (activations,
// column-major, pair j at j*SK4) as fp16 tiles of BK elements, frag (one 16x16 fp32 fragment per
// subgroup), the Y binding y, the sorted pairs and the push constants p (N, yStride), and the
// constants SK4, BK, FR and FC. They are macros, not functions: as functions taking the accumulator
// arrays, glslc -O compiled both kernels to other SPIR-V; as macros it is the SPIR-V their GPU
// tests ran.

// MOE_TILE_MUL_ADD(acc, sr, st) adds the products of one BK-deep step of sa and sb to the
// subgroup's accumulators acc (FR·FC fragments).
#define MOE_TILE_MUL_ADD(acc, sr, st) \
    [[unroll]] for (uint kh = 0u; kh < BK / 4u; kh += 4u) { /* 16 elements = 4 f16vec4 per slice */ \
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a[FR]; \
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b[FC]; \
        [[unroll]] for (uint i = 0u; i < FR; i++) \
            coopMatLoad(a[i], sa, (sr + 16u * i) * SK4 + kh, SK4, gl_CooperativeMatrixLayoutRowMajor); \
        [[unroll]] for (uint c = 0u; c < FC; c++) \
            coopMatLoad(b[c], sb, (st + 16u * c) * SK4 + kh, SK4, gl_CooperativeMatrixLayoutColumnMajor); \
        [[unroll]] for (uint i = 0u; i < FR; i++) \
            [[unroll]] for (uint c = 0u; c < FC; c++) acc[i * FC + c] = coopMatMulAdd(a[i], b[c], acc[i * FC + c]); \
    }

// MOE_TILE_STORE(acc, sg, r0, sr, st, first, cnt) scatters subgroup sg's accumulators (rows from
// r0 + sr, the tile's pairs from st: sorted[first + j] for j below cnt) to their pairs' rows of Y
// through the subgroup's fragment; pairs past cnt and rows past N are left alone.
#define MOE_TILE_STORE(acc, sg, r0, sr, st, first, cnt) { \
    uint lane = gl_SubgroupInvocationID; \
    [[unroll]] for (uint f = 0u; f < FR * FC; f++) { \
        uint fr = r0 + sr + 16u * (f / FC), fc = st + 16u * (f % FC); \
        coopMatStore(acc[f], frag, sg * 256u, 16u, gl_CooperativeMatrixLayoutColumnMajor); \
        subgroupMemoryBarrierShared(); \
        subgroupBarrier(); \
        for (uint el = lane; el < 256u; el += 32u) { \
            uint j = fc + el / 16u, r = fr + el % 16u; /* column-major: pair el/16, row el%16 */ \
            if (j < cnt && r < p.N) y[sorted[first + j] * p.yStride + r] = frag[sg * 256u + el]; \
        } \
        subgroupBarrier(); /* every lane has read the fragment before the next store */ \
    } \
}
