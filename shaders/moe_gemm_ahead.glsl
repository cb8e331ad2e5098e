// moe_gemm_ahead.glsl: moe_gemm_coopmat.glsl's grouped expert products with the weights' loads
// issued a chunk ahead of their use (VKLLM_GPU_MOE_AHEAD). Same bindings, push constants, tiles
// and result as moe_gemm_coopmat.glsl: Y[q·yStride + r] = Σ_k W_e[r][k] · X[xrow(q)·xStride + k]
// for every pair q of a tile, fp16 16x16x16 products with fp32 accumulation.
//
// Why: moe_gemm_coopmat expands each K step's weights right after loading them, so every step
// of every subgroup waits for a full trip to memory between its two barriers; with one or two
// workgroups a multiprocessor nothing hides it. Here a workgroup of 4 subgroups of 32 threads
// takes 64 rows of the expert (BM) and BN pairs (MOE_BN: the engine builds 64, for the products
// of long rows; 32 compiles too). The raw bytes of its rows
// for CH elements of K (a chunk: 256, or 128 where 8 blocks would not fit) are copied, word
// for word and at their offsets modulo 4 (so dequant.glsl's alignment holds), into shared
// memory `w`, which dequant.glsl's dq32 then reads; the next chunk's words are loaded into
// registers while this chunk's steps run and stored once its last step has expanded. Each
// 64-deep step: every thread expands one 32-element unit (a lane pair a row's two units) into
// fp16 tiles, the first 2·BN threads convert the pairs' activations they loaded during the
// step before, then the subgroups (2 rows x 2 pairs, 32 rows x BN/2 pairs each) multiply.
// Rows past N, units past K and pairs past the tile's count are zeros; results are scattered to
// their pairs' rows through a per-subgroup fp32 fragment. Tiles, parts and exits are
// moe_gemm_coopmat.glsl's. The including shader defines one weight type (see dequant.glsl).
//
// MOE_AHEAD_PLAIN (the _plain kernels, for tests on devices without cooperative matrices)
// replaces the cooperative-matrix products and their store with plain fp32 sums of the same fp16
// tiles, a thread a row and every second pair: the chunks, their offsets and the tiles are the
// same code.
#ifndef MOE_AHEAD_PLAIN
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#endif
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint wq[]; };
layout(std430, binding = 1) readonly buffer Xb { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Yb { float y[]; };
layout(std430, binding = 3) readonly buffer Tb { uint tiles[]; };
layout(std430, binding = 4) readonly buffer Sb { uint sorted[]; };
layout(push_constant) uniform P {
    uint K;        // row length (elements, a multiple of 32 and of the type's block)
    uint N;        // rows of one expert
    uint e0;       // first expert in the W binding
    uint ne;       // experts in the W binding
    uint used;     // pairs per token
    uint xPerPair; // 1: X row q, 0: X row q / used
    uint xStride;  // elements between X rows (a multiple of 4)
    uint yStride;  // elements between Y rows
    uint parts;    // workgroups per tile along z: a tile of up to parts·BN pairs, BN a part
} p;

#include "dequant_blocks.glsl" // BLOCK_ELEMS, BLOCK_BYTES: they size w

const uint BM = 64u;           // rows per workgroup (moeAheadRows in engine/vulkan/moe.go)
#ifndef MOE_BN
#define MOE_BN 32
#endif
const uint BN = MOE_BN;        // pairs per tile
const uint NT = 128u;          // threads
const uint BK = 64u;           // K per step (two units)
const uint SK4 = BK / 4u + 2u; // padded shared row stride in f16vec4
const uint FR = 2u;            // 16-row fragments per subgroup (32 rows)
const uint FC = BN / 32u;      // 16-pair fragments per subgroup (BN/2 pairs)

// A chunk: CH elements of K, CHB blocks, RAW bytes of each row; a row's slot in w is RWS words
// (odd, so a warp reading one word of 32 rows touches 32 banks), room for its bytes starting at
// any offset modulo 4 and for load4's word after them.
const uint CH = BLOCK_BYTES * (256u / BLOCK_ELEMS) > 300u ? 128u : 256u;
const uint CHB = CH / BLOCK_ELEMS;
const uint RAW = CHB * BLOCK_BYTES;
const uint RWS = ((RAW + 3u) / 4u + 2u) | 1u;
const uint WPT = (BM * RWS + NT - 1u) / NT; // words each thread carries ahead
const uint UPC = CH / 32u;                  // units a chunk

shared uint w[BM * RWS];      // this chunk's raw rows, read by dq32
shared f16vec4 sa[BM * SK4];  // weights: row r at r*SK4 (row-major A)
shared f16vec4 sb[BN * SK4];  // activations: pair j at j*SK4 (column-major B)
#ifndef MOE_AHEAD_PLAIN
shared float frag[4u * 256u]; // one 16x16 fp32 fragment per subgroup, for the scattered store
#endif

#define IQ_GRIDS_SHARED // i-quant codebooks in shared memory: constant arrays indexed per lane serialize
#include "dequant.glsl"
#ifndef MOE_AHEAD_PLAIN
#include "moe_tile_mma.glsl"
#endif

// fetchChunk loads chunk c of the workgroup's rows (r0.., of the expert at byte wbase) into ahead.
void fetchChunk(uint c, uint tid, uint r0, uint wbase, uint rowBytes, out uint ahead[WPT]) {
    [[unroll]] for (uint i = 0u; i < WPT; i++) {
        uint idx = tid + i * NT;
        uint rr = idx / RWS, wd = idx % RWS;
        uint row = r0 + rr;
        ahead[i] = 0u;
        if (rr < BM && row < p.N && c * RAW < rowBytes) {
            uint start = wbase + row * rowBytes + c * RAW;
            uint bytes = min(RAW, rowBytes - c * RAW);
            if (wd < ((start & 3u) + bytes + 3u) / 4u) ahead[i] = wq[(start >> 2) + wd];
        }
    }
}

// storeChunk puts the words fetchChunk loaded into w.
void storeChunk(uint tid, in uint ahead[WPT]) {
    [[unroll]] for (uint i = 0u; i < WPT; i++) {
        uint idx = tid + i * NT;
        if (idx < BM * RWS) w[idx] = ahead[i];
    }
}

// loadX loads the activations of step unit u0 that thread tid (below 2·BN) converts.
void loadX(uint u0, uint tid, uint cnt, uint xrow, uint units, out vec4 xr[8]) {
    uint j = tid % BN, ux = u0 + tid / BN;
    bool in_ = j < cnt && ux < units;
    uint xb = xrow * (p.xStride / 4u) + ux * 8u;
    [[unroll]] for (uint i = 0u; i < 8u; i++) xr[i] = in_ ? x4[xb + i] : vec4(0.0);
}

void main() {
#if defined(T_IQUANT)
    iqGridsLoad(); // made visible by the barrier before the first step
#endif
    uint parts = max(p.parts, 1u);
    uint t = gl_WorkGroupID.z / parts, skip = (gl_WorkGroupID.z % parts) * BN;
    uint tid = gl_LocalInvocationID.x;
    uint r0 = gl_WorkGroupID.x * BM;
    if (t >= tiles[0] || r0 >= p.N || skip >= tiles[3u + 3u * t]) return; // uniform over the workgroup
    uint e = tiles[1u + 3u * t], first = tiles[2u + 3u * t] + skip, cnt = min(tiles[3u + 3u * t] - skip, BN);
    if (e < p.e0 || e - p.e0 >= p.ne) return;
    uint rowBytes = (p.K / BLOCK_ELEMS) * BLOCK_BYTES;
    uint wbase = (e - p.e0) * p.N * rowBytes;
#ifndef MOE_AHEAD_PLAIN
    uint sg = gl_SubgroupID;
    uint sr = (sg % 2u) * 32u; // this subgroup's rows within the tile
    uint st = (sg / 2u) * (BN / 2u); // and pairs
#endif
    uint jx = tid % BN;
    uint qx = sorted[first + min(jx, cnt - 1u)];
    uint xrow = p.xPerPair != 0u ? qx : qx / p.used;

    // The row and unit (within a step) this thread expands: a lane pair takes a row's two units.
    uint rr = tid / 2u, uh = tid % 2u;
    uint row = r0 + rr;

#ifdef MOE_AHEAD_PLAIN
    uint prow = tid % BM, pj = tid / BM; // this thread's row and first pair (then every second)
    float pacc[BN / 2u];
    [[unroll]] for (uint i = 0u; i < BN / 2u; i++) pacc[i] = 0.0;
#else
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[FR * FC];
    [[unroll]] for (uint i = 0u; i < FR * FC; i++) acc[i] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
#endif

    uint units = p.K / 32u;
    uint chunks = (units + UPC - 1u) / UPC;
    uint ahead[WPT];
    vec4 xr[8];
    fetchChunk(0u, tid, r0, wbase, rowBytes, ahead);
    storeChunk(tid, ahead);
    if (chunks > 1u) fetchChunk(1u, tid, r0, wbase, rowBytes, ahead);
    if (tid < 2u * BN) loadX(0u, tid, cnt, xrow, units, xr);
    barrier(); // chunk 0 (and the grids) visible

    for (uint c = 0u; c < chunks; c++) {
        uint uEnd = min((c + 1u) * UPC, units);
        // This thread's row's bytes sit in its slot at their offset modulo 4.
        uint rowOff = rr * RWS * 4u + ((wbase + row * rowBytes + c * RAW) & 3u);
        for (uint u0 = c * UPC; u0 < uEnd; u0 += BK / 32u) {
            uint u = u0 + uh;
            float v[32];
            if (row < p.N && u < units) {
                uint ul = u - c * UPC;
                dq32(rowOff + (ul / UNITS_PER_BLOCK) * BLOCK_BYTES, ul % UNITS_PER_BLOCK, v);
            } else {
                [[unroll]] for (uint i = 0u; i < 32u; i++) v[i] = 0.0;
            }
            [[unroll]] for (uint i = 0u; i < 8u; i++)
                sa[rr * SK4 + uh * 8u + i] = f16vec4(v[4u * i], v[4u * i + 1u], v[4u * i + 2u], v[4u * i + 3u]);
            if (tid < 2u * BN) { // uniform per subgroup
                [[unroll]] for (uint i = 0u; i < 8u; i++) sb[(tid % BN) * SK4 + (tid / BN) * 8u + i] = f16vec4(xr[i]);
            }
            barrier(); // the step's tiles written; every read of this chunk's w for the step done
            if (u0 + BK / 32u >= uEnd && c + 1u < chunks) { // the chunk's last step: the next one's words in
                storeChunk(tid, ahead);
                if (c + 2u < chunks) fetchChunk(c + 2u, tid, r0, wbase, rowBytes, ahead);
            }
            if (tid < 2u * BN && u0 + BK / 32u < units) loadX(u0 + BK / 32u, tid, cnt, xrow, units, xr);
#ifdef MOE_AHEAD_PLAIN
            for (uint i = 0u; i < BN / 2u; i++) {
                uint j = pj + 2u * i;
                float sum = 0.0;
                for (uint k4 = 0u; k4 < BK / 4u; k4++) sum += dot(vec4(sa[prow * SK4 + k4]), vec4(sb[j * SK4 + k4]));
                pacc[i] += sum;
            }
#else
            MOE_TILE_MUL_ADD(acc, sr, st)
#endif
            barrier(); // the products have read sa/sb; the next chunk's w visible
        }
    }

#ifdef MOE_AHEAD_PLAIN
    for (uint i = 0u; i < BN / 2u; i++) {
        uint j = pj + 2u * i, r = r0 + prow;
        if (j < cnt && r < p.N) y[sorted[first + j] * p.yStride + r] = pacc[i];
    }
#else
    MOE_TILE_STORE(acc, sg, r0, sr, st, first, cnt)
#endif
}
