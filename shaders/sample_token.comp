#version 450
// sample_token: the next token drawn from one row of logits as engine/sample's chain draws it
// (top-k, top-p at temperature 1, min-p, then the temperature and a draw with the host's
// uniform u, the candidates in order of logit, then id), in one workgroup, so that a sampled
// generation keeps its next decode step queued on the device (engine/vulkan/sample.go).
//
// The host sums in float64, this kernel in float32: the same token except where u, or the
// top-p or min-p cut, falls within rounding of a boundary between two candidates.
//
// out[0] = the token; out[1] = 0: drawn here; 1: the host must draw (more than p.cap candidates
// above the cut's logit threshold, or an infinite logit), out[0] the argmax meanwhile; 2: no
// logit that is not NaN, out[0] = 0.
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Lb { float logit[]; };
// the generation's settings: temperature (> 0), top_k (0 off), top_p (0 or 1 off), min_p (0 off)
layout(std430, binding = 1) readonly buffer Sb { float temp; uint topK; float topP; float minP; } cfg;
layout(std430, binding = 2) readonly buffer Ub { float u; } draw;
layout(std430, binding = 3) writeonly buffer Ob { uint o[2]; };
layout(push_constant) uniform P { uint n; uint cap; } p; // cap: the most candidates, at most CAP

const uint T = 256u;
const uint CAP = 1024u;
const uint NONE = 0xffffffffu;
const float INF = 1.0 / 0.0;

shared float redV[T];
shared uint redI[T];
shared uint redC[T];
shared float candL[CAP]; // candidates' logits, then sorted
shared uint candI[CAP];  // their ids
shared float candP[CAP]; // their probabilities (unnormalised where the draw needs only ratios)
shared uint nCand;
shared uint sKept, sRetry, sTok, sStatus;
shared float sGap, sLo, sHi; // the threshold's gap below the largest logit; its bracket (sHi < 0: none yet)

// before: a sorts ahead of b (larger logit; the lower id on ties).
bool before(float la, uint ia, float lb, uint ib) {
	return la > lb || (la == lb && ia < ib);
}

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint n = p.n;

	// 1. the largest logit (the lowest id on ties), how many are not NaN and, for top-p, the
	// mass at temperature 1: each thread's sum of exp(v - its max), rescaled as the max grows
	// and as the reduction meets larger maxima (one pass over the logits instead of two)
	float best = -INF, mass = 0.0;
	uint bi = NONE, cnt = 0u;
	for (uint i = tid; i < n; i += T) {
		float v = logit[i];
		if (isnan(v)) continue;
		cnt++;
		if (bi == NONE || v > best) {
			mass = bi == NONE || isinf(best) ? 0.0 : mass * exp(best - v);
			best = v; bi = i;
		}
		if (!isinf(v)) mass += exp(v - best);
	}
	redV[tid] = best; redI[tid] = bi; redC[tid] = cnt; candP[tid] = mass;
	barrier();
	for (uint s = T / 2u; s > 0u; s >>= 1) {
		if (tid < s) {
			float v = redV[tid + s]; uint j = redI[tid + s];
			float m0 = redV[tid], z0 = candP[tid], z1 = candP[tid + s];
			if (j != NONE && (redI[tid] == NONE || v > redV[tid] || (v == redV[tid] && j < redI[tid]))) {
				redV[tid] = v; redI[tid] = j;
			}
			float m = redV[tid];
			candP[tid] = (isinf(m) ? 0.0 : (z0 > 0.0 ? z0 * exp(m0 - m) : 0.0) + (z1 > 0.0 ? z1 * exp(v - m) : 0.0));
			redC[tid] += redC[tid + s];
		}
		barrier();
	}
	float maxL = redV[0];
	uint argmax = redI[0], count = redC[0];
	float z = candP[0];
	barrier();
	if (count == 0u) {
		if (tid == 0u) { o[0] = 0u; o[1] = 2u; }
		return;
	}
	if (isinf(maxL) || cfg.temp <= 0.0) { // the host shares an infinite logit's mass; greedy is the argmax
		if (tid == 0u) { o[0] = argmax; o[1] = isinf(maxL) ? 1u : 0u; }
		return;
	}
	float temp = cfg.temp;
	float u = clamp(draw.u, 0.0, 1.0);
	bool cutP = cfg.topP > 0.0 && cfg.topP < 1.0;
	bool cutMin = cfg.minP > 0.0;
	uint topK = cfg.topK;

	if (topK == 0u && !cutP && !cutMin) {
		// 2a. no cut: every token at the temperature, drawn in id order; each thread sums a
		// contiguous run, thread 0 finds the run holding u·total, its thread the token
		uint per = (n + T - 1u) / T;
		uint lo = min(tid * per, n), hi = min(lo + per, n);
		float sum = 0.0;
		for (uint i = lo; i < hi; i++) {
			float v = logit[i];
			if (!isnan(v)) sum += exp((v - maxL) / temp);
		}
		redV[tid] = sum;
		barrier();
		if (tid == 0u) {
			float total = 0.0;
			for (uint t = 0u; t < T; t++) total += redV[t];
			float target = u * total, cum = 0.0;
			uint run = NONE, last = NONE;
			for (uint t = 0u; t < T; t++) {
				if (redV[t] > 0.0) last = t;
				if (run == NONE && redV[t] > 0.0 && target < cum + redV[t]) { run = t; candP[0] = cum; }
				cum += redV[t];
			}
			if (run == NONE) { run = last; candP[0] = cum - redV[last]; }
			sKept = run;
			candP[1] = target;
		}
		barrier();
		if (tid == sKept) {
			float cum = candP[0], target = candP[1];
			uint tok = NONE;
			for (uint i = lo; i < hi; i++) {
				float v = logit[i];
				if (isnan(v)) continue;
				cum += exp((v - maxL) / temp);
				tok = i;
				if (target < cum) break;
			}
			o[0] = tok; o[1] = 0u;
		}
		return;
	}

	// 3. the candidates at or above maxL - gap, a prefix of the sorted order: min-p's own bound,
	// else a gap doubled until top-k has its k, or top-p its mass, as the host widens its own
	// from 10 (the kept prefix does not depend on where the widening starts; a narrow start
	// keeps the candidates within CAP)
	// A gap too narrow (too few candidates) and one too wide (more than cap) bracket the search:
	// it doubles until it has a wide one, then halves the bracket.
	bool fixedGap = cutMin && topK == 0u;
	if (tid == 0u) {
		sGap = fixedGap ? -log(cfg.minP) + 1e-3 : 1.0;
		sLo = 0.0;
		sHi = -1.0;
	}
	for (uint round = 0u; round < 200u; round++) {
		if (tid == 0u) nCand = 0u;
		barrier();
		float thr = maxL - sGap;
		for (uint i = tid; i < n; i += T) {
			float v = logit[i];
			if (v >= thr) {
				uint k = atomicAdd(nCand, 1u);
				if (k < CAP) { candL[k] = v; candI[k] = i; }
			}
		}
		barrier();
		uint nc = nCand;
		bool tooMany = nc > min(p.cap, CAP);
		bool tooFew = !tooMany && topK > 0u && nc < topK && nc < count;
		if (tooMany || tooFew) {
			if (tid == 0u) {
				if (tooMany) {
					sHi = sGap;
				} else {
					sLo = sGap;
				}
				sRetry = (tooMany && (fixedGap || sHi - sLo < 1e-4 * max(1.0, sHi))) ? 0u : 1u;
				sGap = sHi < 0.0 ? 2.0 * sGap : 0.5 * (sLo + sHi);
			}
			barrier();
			if (sRetry == 0u) {
				if (tid == 0u) { o[0] = argmax; o[1] = 1u; }
				return;
			}
			continue;
		}
		// sort the candidates (bitonic, padded to a power of two)
		uint size = 1u;
		while (size < nc) size <<= 1;
		for (uint i = nc + tid; i < size; i += T) { candL[i] = -INF; candI[i] = NONE; }
		barrier();
		for (uint k = 2u; k <= size; k <<= 1) {
			for (uint j = k >> 1; j > 0u; j >>= 1) {
				for (uint i = tid; i < size; i += T) {
					uint l = i ^ j;
					if (l > i) {
						bool ahead = (i & k) == 0u; // this half runs in sorted order
						float li = candL[i], ll = candL[l];
						uint ii = candI[i], il = candI[l];
						if (ahead == before(ll, il, li, ii)) {
							candL[i] = ll; candL[l] = li; candI[i] = il; candI[l] = ii;
						}
					}
				}
				barrier();
			}
		}
		// probabilities at temperature 1: over the top k themselves, or over the whole mass z
		uint m = topK > 0u ? min(nc, topK) : nc;
		float ref = topK > 0u ? candL[0] : maxL;
		for (uint i = tid; i < m; i += T) candP[i] = exp(candL[i] - ref);
		barrier();
		if (tid == 0u) {
			float norm = cutP ? z : 1.0; // min-p alone needs only the ratios
			if (topK > 0u) {
				norm = 0.0;
				for (uint i = 0u; i < m; i++) norm += candP[i];
			}
			uint kept = m;
			float mass = 0.0;
			for (uint i = 0u; i < m; i++) mass += candP[i] / norm;
			if (cutP) {
				float cum = 0.0;
				for (uint i = 0u; i < m; i++) {
					cum += candP[i] / norm;
					if (cum >= cfg.topP) { kept = i + 1u; break; }
				}
			}
			sRetry = (topK == 0u && !cutMin && kept == m && nc < count && mass < cfg.topP) ? 1u : 0u;
			if (sRetry == 1u) {
				sLo = sGap;
				sGap = sHi < 0.0 ? 2.0 * sGap : 0.5 * (sLo + sHi);
			}
			if (cutMin) {
				float limit = candP[0] / norm * cfg.minP;
				for (uint i = 1u; i < kept; i++) {
					if (candP[i] / norm < limit) { kept = i; break; }
				}
			}
			sKept = kept;
		}
		barrier();
		if (sRetry == 1u) {
			barrier();
			continue;
		}
		// 4. the kept candidates at the temperature, drawn in sorted order
		uint kept = sKept;
		for (uint i = tid; i < kept; i += T) candP[i] = exp((candL[i] - candL[0]) / temp);
		barrier();
		if (tid == 0u) {
			float total = 0.0;
			for (uint i = 0u; i < kept; i++) total += candP[i];
			float target = u * total, cum = 0.0;
			uint tok = candI[kept - 1u];
			for (uint i = 0u; i < kept; i++) {
				cum += candP[i];
				if (target < cum) { tok = candI[i]; break; }
			}
			o[0] = tok; o[1] = 0u;
		}
		return;
	}
	if (tid == 0u) { o[0] = argmax; o[1] = 1u; }
}
