// moe_route.glsl: routeToken, a mixture-of-experts router's choice for one token on the
// device (moe_route.comp says how it chooses and weighs; moe_matvec_x8.glsl's ROUTE_INSIDE
// variant makes the choice itself in every workgroup). The includer declares the buffers
// logits, ids and wts, includes exact.glsl, and defines R_NE, R_USED, R_GATING, R_NORM and
// R_SCALE (its push constants), and ROUTE_THREADS where its workgroup is not 64 threads.
#ifndef ROUTE_THREADS
#define ROUTE_THREADS 64u
#endif
const uint THREADS = ROUTE_THREADS; // the threads holding experts (the first of the workgroup)
const uint PER = 512u / THREADS;    // experts a thread holds: NE <= 512
shared float redF[2][64]; // per-subgroup partial results (at most 64 subgroups), two slots used in turn
shared uint redU[2][64];
shared uint redI[2][64]; // wgArgMax's per-subgroup indices
shared uint sel[64];
shared float selP[64];

// Each reduction writes its subgroup's result into slot `slot`, waits once, and combines every
// subgroup's; consecutive reductions alternate slots, so a slot is rewritten only after every
// thread has passed the barrier of the reduction in between (and so has read it).
float wgMaxF(float v, uint slot) {
    v = subgroupMax(v);
    if (subgroupElect()) redF[slot][gl_SubgroupID] = v;
    barrier();
    float r = redF[slot][0];
    for (uint g = 1u; g < gl_NumSubgroups; g++) r = max(r, redF[slot][g]);
    return r;
}
float wgSumF(float v, uint slot) {
    v = subgroupAdd(v);
    if (subgroupElect()) redF[slot][gl_SubgroupID] = v;
    barrier();
    float r = redF[slot][0];
    for (uint g = 1u; g < gl_NumSubgroups; g++) r += redF[slot][g];
    return r;
}
// wgArgMax returns the index of the workgroup's largest key, the lowest index among equal keys
// (bi: this thread's best index for its key bk): each subgroup reduces its own (key, index),
// and the subgroups' pairs meet across one barrier (a selection took two before).
uint wgArgMax(uint bk, uint bi, uint slot) {
    uint sk = subgroupMax(bk);
    uint si = subgroupMin(bk == sk ? bi : 0xffffffffu);
    if (subgroupElect()) {
        redU[slot][gl_SubgroupID] = sk;
        redI[slot][gl_SubgroupID] = si;
    }
    barrier();
    uint rk = redU[slot][0], ri = redI[slot][0];
    for (uint g = 1u; g < gl_NumSubgroups; g++) {
        uint k = redU[slot][g], i = redI[slot][g];
        if (k > rk || (k == rk && i < ri)) {
            rk = k;
            ri = i;
        }
    }
    return ri;
}

// rankKey orders candidates as the selection does: larger values first (-0 as +0), any number
// before a NaN, a NaN before no candidate (0); equal keys go to the lower index.
uint rankKey(float v, bool present) {
    if (!present) return 0u;
    if (isnan(v)) return 1u;
    uint u = floatBitsToUint(v == 0.0 ? 0.0 : v);
    return (u >> 31) != 0u ? ~u : (u | 0x80000000u);
}

// routeSync orders the route's shared-memory writes before the reads that follow: among the
// workgroup's threads (a barrier), or within the one subgroup that routes (sub).
void routeSync(bool sub) {
    if (sub) {
        subgroupMemoryBarrierShared();
        subgroupBarrier();
    } else {
        barrier();
    }
}

// routeWeights makes the weights of the choices in sel and selP and, with write, writes
// choices and weights to ids and wts from t·USED: thread (or lane) me < USED takes choice me.
// Every sum runs over the choices in order (j = 0, 1, ..), the same f32 operations the CPU's
// route makes, each thread reading them from shared memory: one exp and one or two divisions a
// thread instead of USED of each in one thread. Every thread of the workgroup calls it, or
// with sub every lane of the one subgroup that chose.
void routeWeights(uint t, uint me, bool write, bool sub) {
    routeSync(sub); // sel and selP hold every choice
    bool mine = me < R_USED;
    float w = mine ? selP[me] : 0.0;
    if (R_GATING == 3u) {
        float mx = selP[0];
        for (uint j = 1u; j < R_USED; j++) mx = max(mx, selP[j]);
        if (mine) {
            precise float d = w - mx;
            w = expExact(d);
        }
        routeSync(sub); // every thread has read selP
        if (mine) selP[me] = w;
        routeSync(sub);
        float sum = 0.0;
        for (uint j = 0u; j < R_USED; j++) sum += selP[j];
        float inv = divExact(1.0, sum);
        precise float v = w * inv;
        w = v;
    }
    if (R_NORM != 0u) {
        routeSync(sub); // every thread has read selP
        if (mine) selP[me] = w;
        routeSync(sub);
        float sum = 0.0;
        for (uint j = 0u; j < R_USED; j++) sum += selP[j];
        float total = max(sum, 6.103515625e-5);
        w = divExact(w, total);
    }
    if (mine && write) {
        precise float v = R_SCALE == 1.0 ? w : w * R_SCALE;
        ids[t * R_USED + me] = sel[me];
        wts[t * R_USED + me] = v;
    }
}

#ifdef ROUTE_ONE_SUBGROUP
// SG_PER is the most experts a lane holds in routeOneSubgroup: ROUTE_SG_PER, which the
// including shader defines (the _1sg4 variants: 4, Qwen3-30B-A3B's 128 experts on 32 lanes;
// Context.routeKernel takes them up to 4 a lane). Every slot is a register of every thread of
// the kernel, whichever path it takes: router_route_f32's product runs in all its workgroups
// with the registers the route would need, so the fewest slots that hold the experts leave it
// the most workgroups an SM.
#ifndef ROUTE_SG_PER
#error "moe_route.glsl: ROUTE_ONE_SUBGROUP needs ROUTE_SG_PER, the experts a lane holds"
#endif
const uint SG_PER = ROUTE_SG_PER;

// routeOneSubgroup is routeToken by the first subgroup alone, where its lanes hold every
// expert (NE <= 16 lanes' worth, USED <= its lanes): the same keys, the same choice (the
// largest key, the lower index on a tie) and the same weights' arithmetic, but each choice is
// two subgroup reductions with no barrier between choices (with two or more subgroups holding
// experts, every choice waits at a barrier for the other subgroups' candidates: ~8 µs for 8 of
// 128 experts on an H100, a serial stage of every MoE layer's decode step). Lane l holds
// experts l, l + L, ... (L: the subgroup size). The softmax's sum is a subgroup sum (another
// order than the workgroup's: the weights may differ from it in the last bit).
void routeOneSubgroup(uint t, bool write) {
    uint L = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
    float prob[SG_PER];
    [[unroll]] for (uint k = 0u; k < SG_PER; k++) {
        uint i = lane + L * k;
        prob[k] = i < R_NE ? logits[t * R_NE + i] : 0.0;
    }
    if (R_GATING == 1u) {
        float mx = -1.0 / 0.0;
        [[unroll]] for (uint k = 0u; k < SG_PER; k++) {
            if (lane + L * k < R_NE) mx = max(mx, prob[k]);
        }
        mx = subgroupMax(mx);
        float sum = 0.0;
        [[unroll]] for (uint k = 0u; k < SG_PER; k++) {
            if (lane + L * k < R_NE) {
                precise float d = prob[k] - mx;
                prob[k] = expExact(d);
                sum += prob[k];
            }
        }
        float inv = divExact(1.0, subgroupAdd(sum));
        [[unroll]] for (uint k = 0u; k < SG_PER; k++) {
            precise float v = prob[k] * inv;
            prob[k] = v;
        }
    } else if (R_GATING == 2u) {
        [[unroll]] for (uint k = 0u; k < SG_PER; k++) {
            if (lane + L * k < R_NE) {
                precise float d = 1.0 + expExact(-prob[k]);
                prob[k] = divExact(1.0, d);
            }
        }
    }
    uint key[SG_PER]; // 0 once taken (or never present)
    [[unroll]] for (uint k = 0u; k < SG_PER; k++) key[k] = rankKey(prob[k], lane + L * k < R_NE);
    for (uint j = 0u; j < R_USED; j++) {
        uint bk = 0u, bi = 0xffffffffu, bkk = 0u; // this lane's best untaken expert (ascending k: ties keep the lower index)
        float bp = 0.0;
        [[unroll]] for (uint k = 0u; k < SG_PER; k++) {
            if (key[k] > bk) {
                bk = key[k];
                bi = lane + L * k;
                bp = prob[k];
                bkk = k;
            }
        }
        uint sk = subgroupMax(bk);
        uint choice = subgroupMin(bk == sk ? bi : 0xffffffffu);
        if (bi == choice) { // the owner marks it and hands its probability over
            [[unroll]] for (uint k = 0u; k < SG_PER; k++) if (k == bkk) key[k] = 0u;
            sel[j] = choice;
            selP[j] = bp;
        }
    }
    routeWeights(t, lane, write, true);
}

#endif

// routeToken chooses token t's experts into sel (every choice, best first, once it returns)
// and, with write, writes the choice and weights to ids and wts from t·USED; every thread of
// the workgroup calls it (tid: its index; those from THREADS on hold no expert, so a larger
// workgroup chooses as THREADS threads do, its extra subgroups adding identities). Where one
// subgroup can hold every expert, it alone chooses (routeOneSubgroup, ROUTE_ONE_SUBGROUP).
void routeToken(uint t, uint tid, bool write) {
#ifdef ROUTE_ONE_SUBGROUP
    if (gl_SubgroupSize >= 8u && gl_SubgroupSize <= THREADS && R_NE <= SG_PER * gl_SubgroupSize && R_USED <= gl_SubgroupSize) { // uniform
        if (gl_SubgroupID == 0u) routeOneSubgroup(t, write);
        barrier(); // sel holds every choice for the whole workgroup
        return;
    }
#endif
    uint held = tid < THREADS ? R_NE : 0u; // experts below this index are the thread's to hold
    float prob[PER];
    [[unroll]] for (uint k = 0u; k < PER; k++) {
        uint i = tid + THREADS * k;
        prob[k] = i < held ? logits[t * R_NE + i] : 0.0;
    }
    uint slot = 0u;
    if (R_GATING == 1u) {
        float mx = -1.0 / 0.0;
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            if (tid + THREADS * k < held) mx = max(mx, prob[k]);
        }
        mx = wgMaxF(mx, slot);
        slot ^= 1u;
        float sum = 0.0;
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            if (tid + THREADS * k < held) {
                precise float d = prob[k] - mx;
                prob[k] = expExact(d);
                sum += prob[k];
            }
        }
        float inv = divExact(1.0, wgSumF(sum, slot));
        slot ^= 1u;
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            precise float v = prob[k] * inv;
            prob[k] = v;
        }
    } else if (R_GATING == 2u) {
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            if (tid + THREADS * k < held) {
                precise float d = 1.0 + expExact(-prob[k]);
                prob[k] = divExact(1.0, d);
            }
        }
    }
    uint taken = 0u; // bit k: expert tid + THREADS·k is chosen
    for (uint j = 0u; j < R_USED; j++) {
        uint bk = 0u, bi = 0xffffffffu; // this thread's best untaken expert (ascending k: ties keep the lower index)
        [[unroll]] for (uint k = 0u; k < PER; k++) {
            uint i = tid + THREADS * k;
            uint key = rankKey(prob[k], i < held && (taken & (1u << k)) == 0u);
            if (key > bk) {
                bk = key;
                bi = i;
            }
        }
        uint choice = wgArgMax(bk, bi, slot);
        slot ^= 1u;
        if (choice % THREADS == tid) { // the owner marks it and hands its probability over
            uint k = choice / THREADS;
            taken |= 1u << k;
            float v = prob[0];
            [[unroll]] for (uint kk = 1u; kk < PER; kk++) if (kk == k) v = prob[kk];
            sel[j] = choice;
            selP[j] = v;
        }
    }
    routeWeights(t, tid, write, false);
}

