// moe_down_x8.glsl: a decode step's expert down products and their combine in one dispatch
// (moe_matvec_x8.glsl's down product, then moe_combine.comp's weighted sum). For the token's
// USED pairs j (expert e_j = ids[j], weight wts[j], hidden row h_j rounded by quantize_x8):
//   X[r] += Σ_j wts[j] · (W_{e_j}[r] · h_j)   (+ sigmoid(g) · S[r] with a shared expert)
// A subgroup takes NR rows; its lanes stride over a row's USED·units (pair, 32-element unit)
// products, each scaled by its pair's weight, and one subgroup sum ends each row: no lane idles
// on the short rows of an expert's down product (768 elements: 24 units), and no pass writes
// the pairs' outputs for another to read. The sums are f32 in an order of their own (the fast
// tier's; moe_combine keeps the CPU's order). W binds the whole 3-D expert tensor.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) readonly buffer Wb { uint w[]; };
layout(std430, binding = 0) readonly buffer W4b { uvec4 w4[]; };
layout(std430, binding = 1) readonly buffer Xb { uvec4 xq4[]; };
layout(std430, binding = 2) readonly buffer Sb { vec2 xs[]; };
#ifdef ROUND_NEXT
// ROUND_NEXT (moe_down_x8_<type>_n): the residual, once every workgroup has added its rows, is
// also normalized with the next stage's norm weight ng and rounded as quantize_x8 with F_NORM
// rounds it (32-blocks, or Q8_K's 256-blocks with q8k) into nq and ns, by the last workgroup to
// finish (counted in arrivals, which it resets): the next layer's (or the head's) rounding
// stage goes.
layout(std430, binding = 3) coherent buffer Yb { float y[]; };  // the residual, added to
layout(std430, binding = 8) readonly buffer NGb { vec4 ng4[]; };
layout(std430, binding = 9) writeonly buffer NQb { uint nq[]; };
layout(std430, binding = 10) writeonly buffer NSb { vec2 ns[]; };
layout(std430, binding = 11) coherent buffer Cb { uint arrivals; };
#else
layout(std430, binding = 3) buffer Yb { float y[]; };          // the residual, added to
#endif
layout(std430, binding = 4) readonly buffer Ib { uint ids[]; };
layout(std430, binding = 5) readonly buffer Gw { float wts[]; };
layout(std430, binding = 6) readonly buffer Hb { float sh[]; }; // the shared expert's output
layout(std430, binding = 7) readonly buffer Lb { float g[]; };  // its gate logit
layout(push_constant) uniform P {
    uint K;         // row length (elements, a multiple of 32 and of the block)
    uint N;         // rows of one expert
    uint used;      // pairs of the token
    uint rowsPerX;  // row groups per grid line (gl_NumWorkGroups.x)
    uint hasShared; // 1: add sigmoid(g[0])·sh
#ifdef ROUND_NEXT
    float eps;      // the next norm's epsilon
    uint q8k;       // 1: Q8_K's 256-blocks, 0: 32-blocks
#endif
} p;

const uint NR = 2u;

#include "x8_unit.glsl"
#include "exact.glsl" // expExact, divExact: moe_combine's sigmoid; roundHalf: quantize_x8's rounding

// downRows adds rows row0.. of the combined down products to the residual.
void downRows(uint row0) {
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    uint units = p.K / 32u, nb = units / UNITS_PER_BLOCK;
    uint rowBytes = nb * BLOCK_BYTES;
    uint xWords = ((units + 31u) / 32u) * 64u; // one rounded row: x8QuantBytes(K)/16 words
    float acc[NR];
    [[unroll]] for (uint i = 0u; i < NR; i++) acc[i] = 0.0;
    uint total = p.used * units;
    for (uint t = lane; t < total; t += lanes) {
        uint j = t / units, u = t - j * units;
        uint base = ids[j] * p.N * rowBytes;
        float wj = wts[j];
        uint xi = j * xWords + (u >> 5) * 64u + (u & 31u);
        uvec4 xa = xq4[xi], xb = xq4[xi + 32u];
        vec2 s = xs[j * units + u];
        [[unroll]] for (uint i = 0u; i < NR; i++) {
            uint rb = base + min(row0 + i, p.N - 1u) * rowBytes; // a row past the end re-reads the last (never written)
            acc[i] += wj * unitDot(rb, nb, u, xa, xb, s);
        }
    }
    float sg = 0.0;
    if (p.hasShared != 0u) {
        precise float den = 1.0 + expExact(-g[0]);
        sg = divExact(1.0, den);
    }
    [[unroll]] for (uint i = 0u; i < NR; i++) {
        float v = subgroupAdd(acc[i]);
        uint r = row0 + i;
        if (subgroupElect() && r < p.N) {
            if (p.hasShared != 0u) v += sh[r] * sg;
            y[r] = y[r] + v;
        }
    }
}

#ifdef ROUND_NEXT
shared bool lastArrival;
shared float rPart[128], rVal[128]; // a thread's largest magnitude (its signed value), later its Σq
shared float rGrp[16], rGrpV[16];   // Q8_K: each 8-thread group's
shared float rSS[128];              // the subgroups' sums of squares

// roundNext rounds the whole residual (N values) once every workgroup has added its rows: the
// last to arrive normalizes it (rmsnorm's scale from its squares, times ng) and rounds it in
// passes of 128 vec4s, a vec4 a thread, as quantize_x8 rounds a pass (its sums of squares in
// another order: the scale may differ from quantize_x8's in the last bit). Every thread of the
// workgroup calls it.
void roundNext() {
    uint tid = gl_LocalInvocationID.x;
    uint rowsWG = NR * gl_NumSubgroups;
    memoryBarrierBuffer(); // this thread's rows reach memory before the count
    barrier();             // every subgroup's have
    if (tid == 0u) lastArrival = atomicAdd(arrivals, 1u) == (p.N + rowsWG - 1u) / rowsWG - 1u;
    barrier();
    if (!lastArrival) return; // uniform over the workgroup
    memoryBarrierBuffer();    // every workgroup has added its rows: read the residual
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
        vec4 a = abs(v);
        float tm = a.x, tv = v.x; // the first of the largest magnitudes, in element order
        if (a.y > tm) { tm = a.y; tv = v.y; }
        if (a.z > tm) { tm = a.z; tv = v.z; }
        if (a.w > tm) { tm = a.w; tv = v.w; }
        rPart[tid] = tm;
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
            float iscale = bm != 0.0 ? divExact(-127.0, bv) : 0.0;
            q = min(ivec4(roundEven(iscale * v)), ivec4(127));
            d = bm != 0.0 ? divExact(1.0, iscale) : 0.0;
        } else {
            float amax = 0.0;
            [[unroll]] for (uint j = 0u; j < 8u; j++) amax = max(amax, rPart[b0 + j]);
            float inv = amax > 0.0 ? 127.0 / amax : 0.0;
            q = ivec4(roundEven(v * inv));
            d = roundHalf(amax / 127.0);
        }
        barrier(); // everyone has read the maxima
        rPart[tid] = float((q.x + q.y) + (q.z + q.w));
        barrier();
        if (live) {
            uint u = i / 8u, j = i % 8u;
            uint word = (uint(q.x) & 0xffu) | ((uint(q.y) & 0xffu) << 8) | ((uint(q.z) & 0xffu) << 16) | (uint(q.w) << 24);
            nq[(((u / 32u) * 2u + j / 4u) * 32u + u % 32u) * 4u + j % 4u] = word;
            if (j == 0u) {
                float sum = 0.0;
                [[unroll]] for (uint jj = 0u; jj < 8u; jj++) sum += rPart[b0 + jj];
                ns[u] = vec2(d, sum);
            }
        }
        barrier(); // rPart is reused by the next pass
    }
    if (tid == 0u) arrivals = 0u; // for the next layer
}
#endif

void main() {
#if defined(T_IQUANT)
    x8TablesLoad();
    barrier();
#endif
    uint wgRow0 = (gl_WorkGroupID.x + gl_WorkGroupID.y * p.rowsPerX) * NR * gl_NumSubgroups;
    if (wgRow0 >= p.N) return; // uniform over the workgroup
    uint row0 = wgRow0 + gl_SubgroupID * NR;
#ifdef ROUND_NEXT
    if (row0 < p.N) downRows(row0); // no subgroup leaves: barriers follow
    roundNext();
#else
    if (row0 >= p.N) return; // uniform over the subgroup (no barriers follow)
    downRows(row0);
#endif
}
