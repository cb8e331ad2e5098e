package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// deltaRuleRef is the delta rule of delta_rule.glsl in float64: per token and value head h
// (query and key head h mod kh), l2-normed q and k, the state decayed by e^g, the delta
// update with beta, o = S^T q · scale, then rmsnorm(o)·w·silu(z). It returns the outputs and
// updates st (vh × s × s, row j holding S[·][j]); grouped reads key head h / (vh/kh) instead.
func deltaRuleRef(x, z, beta, g, w, st []float32, s, kh, vh, m int, eps float64, grouped bool) []float32 {
	kd, vd, c := kh*s, vh*s, 2*kh*s+vh*s
	out := make([]float32, m*vd)
	l2 := func(v []float32) []float64 {
		var sum float64
		for _, e := range v {
			sum += float64(e) * float64(e)
		}
		sc := 1 / math.Max(math.Sqrt(sum), eps)
		r := make([]float64, len(v))
		for i, e := range v {
			r[i] = float64(e) * sc
		}
		return r
	}
	for i := 0; i < m; i++ {
		row := x[i*c : (i+1)*c]
		for h := 0; h < vh; h++ {
			k0 := h % kh
			if grouped {
				k0 = h / (vh / kh)
			}
			q, k := l2(row[k0*s:(k0+1)*s]), l2(row[kd+k0*s:kd+(k0+1)*s])
			v := row[2*kd+h*s : 2*kd+(h+1)*s]
			decay, b := math.Exp(float64(g[i*vh+h])), float64(beta[i*vh+h])
			o := make([]float64, s)
			var ss float64
			for j := 0; j < s; j++ {
				sj := st[(h*s+j)*s : (h*s+j+1)*s]
				var dot float64
				for e := range sj {
					sj[e] = float32(float64(sj[e]) * decay)
					dot += float64(sj[e]) * k[e]
				}
				delta := (float64(v[j]) - dot) * b
				var oj float64
				for e := range sj {
					sj[e] = float32(float64(sj[e]) + delta*k[e])
					oj += float64(sj[e]) * q[e]
				}
				o[j] = oj / math.Sqrt(float64(s))
				ss += o[j] * o[j]
			}
			sc := 1 / math.Sqrt(ss/float64(s)+eps)
			for j := 0; j < s; j++ {
				zz := float64(z[i*vd+h*s+j])
				out[i*vd+h*s+j] = float32(o[j] * sc * float64(w[j]) * zz / (1 + math.Exp(-zz)))
			}
		}
	}
	return out
}

// delta_rule_64 and delta_rule_128 against the float64 reference over a window of tokens from a
// random state, value heads twice the key heads, on both tiers. Exact tier (delta_rule_<S>):
// every output and state value within 1e-4 · max(1, |ref|) (f32 sums of S products of
// unit-scale values in the reference's order, measured 1.5e-6 on lavapipe over 3 tokens).
// Fast tier (delta_rule_fast_<S>, fused multiply-adds, four partial sums a dot product, the
// device's exp, log and roots, beta and alpha gated inside from the raw projections, the window
// staged in chunks of 8 tokens): the same bound over 3 tokens (part of a chunk), 8 (one) and 43
// (five and part of one, the state carried through each: the error stays at f32's level
// instead of growing, since e^g < 1 and the delta rule's update contracts it). A wrong head mapping, decay or norm is off by far more:
// negative control, the reference with value head h reading key head h / (vh/kh) (grouped, not
// interleaved) differs from the kernel by more than the bound. Fails if the fast tier does not
// make delta_rule_fast_<S>.
func TestDeltaRuleMatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	const kh, vh = 2, 4
	const eps, bound = 1e-6, 1e-4
	for _, tier := range tiers {
		for _, s := range []int{64, 128} {
			for _, m := range []int{3, 8, 43} {
				if tier.exact && m > 3 {
					continue // the exact kernel's long windows run in the hybrids' CPU comparisons
				}
				t.Run(fmt.Sprintf("%s/%d/%d-tokens", tier.name, s, m), func(t *testing.T) {
					withTier(t, c, tier.exact)
					kernel := fmt.Sprintf("delta_rule_%d", s)
					if !tier.exact {
						kernel = fmt.Sprintf("delta_rule_fast_%d", s)
					}
					forgetKernels(c, kernel)
					rng := rand.New(rand.NewSource(int64(s + m)))
					cd, vd := 2*kh*s+vh*s, vh*s
					x, z, w := randVec(rng, m*cd, 1), randVec(rng, m*vd, 1), randVec(rng, s, 1)
					st := randVec(rng, vh*s*s, 0.1)
					// the raw projections (the fast kernel gates them) and their gates (the exact one's input)
					betaRaw, alphaRaw := randVec(rng, m*vh, 2), randVec(rng, m*vh, 2)
					dtBias, a := randVec(rng, vh, 1), make([]float32, vh)
					for h := range a {
						a[h] = float32(-math.Exp(rng.Float64() - 1)) // A = -exp(A_log)
					}
					beta, g := make([]float32, m*vh), make([]float32, m*vh)
					for i := range beta {
						beta[i] = float32(1 / (1 + math.Exp(-float64(betaRaw[i]))))
						xa := float64(alphaRaw[i]) + float64(dtBias[i%vh])
						if xa <= 20 {
							xa = math.Log1p(math.Exp(xa))
						}
						g[i] = float32(xa * float64(a[i%vh]))
					}
					stB, out := upload(t, c, st), zeros(t, c, m*vd)
					run(t, c, func(sq *Seq) {
						scale := float32(1 / math.Sqrt(float64(s)))
						if tier.exact {
							sq.DeltaRule(upload(t, c, x).All(), upload(t, c, z).All(), upload(t, c, beta).All(), upload(t, c, g).All(), upload(t, c, w).All(),
								stB.All(), out.All(), s, kh, vh, m, cd, eps, scale)
							return
						}
						sq.DeltaRuleFast(upload(t, c, x).All(), upload(t, c, z).All(), upload(t, c, betaRaw).All(), upload(t, c, alphaRaw).All(),
							upload(t, c, dtBias).All(), upload(t, c, a).All(), upload(t, c, w).All(), stB.All(), out.All(), s, kh, vh, m, cd, eps, scale)
					})
					if _, made := c.kernels[kernel]; !made {
						t.Fatalf("the %s tier did not make %s", tier.name, kernel)
					}
					gotO, gotS := readF32(t, out, m*vd), readF32(t, stB, vh*s*s)
					refS := append([]float32(nil), st...)
					refO := deltaRuleRef(x, z, beta, g, w, refS, s, kh, vh, m, eps, false)
					worst := func(got, ref []float32) float64 {
						d := 0.0
						for i := range ref {
							d = math.Max(d, math.Abs(float64(got[i]-ref[i]))/math.Max(1, math.Abs(float64(ref[i]))))
						}
						return d
					}
					dO, dS := worst(gotO, refO), worst(gotS, refS)
					t.Logf("%s: outputs within %.2g, state within %.2g", kernel, dO, dS)
					if dO > bound || dS > bound {
						t.Errorf("%s: outputs off by %.3g, state by %.3g (relative, tolerance %g)", kernel, dO, dS, bound)
					}
					control := deltaRuleRef(x, z, beta, g, w, append([]float32(nil), st...), s, kh, vh, m, eps, true)
					if d := worst(gotO, control); d <= bound {
						t.Errorf("negative control: value heads grouped by h / (vh/kh) give outputs within %.3g of the kernel", d)
					}
				})
			}
		}
	}
}

// BenchmarkDeltaRule times the DeltaNet recurrence of the Qwen3.5/3.6 shape (32 value heads of
// 128 over 16 key heads) for a decode step and a 512-row prefill window on both tiers: GPU time
// from timestamps, best of the runs, in µs a window and µs a token. Run on a real GPU:
// -test.run '^$' -test.bench DeltaRule -test.benchtime 3x.
func BenchmarkDeltaRule(b *testing.B) {
	c := ctxOrSkip(b)
	const s, kh, vh, eps = 128, 16, 32, 1e-6
	rng := rand.New(rand.NewSource(3))
	cd, vd := 2*kh*s+vh*s, vh*s
	for _, m := range []int{1, 512} {
		if c.Info.Type == "cpu" && m > 1 {
			m = 32 // a CPU device takes minutes over a full window
		}
		x, z := benchBuffer(b, c, f32Bytes(randVec(rng, m*cd, 1))), benchBuffer(b, c, f32Bytes(randVec(rng, m*vd, 1)))
		beta, g := benchBuffer(b, c, f32Bytes(randVec(rng, m*vh, 0.5))), benchBuffer(b, c, f32Bytes(randVec(rng, m*vh, 0.1)))
		w, st, out := benchBuffer(b, c, f32Bytes(randVec(rng, s, 1))), benchBuffer(b, c, f32Bytes(randVec(rng, vh*s*s, 0.1))), benchBuffer(b, c, make([]byte, 4*m*vd))
		dt, a := benchBuffer(b, c, f32Bytes(randVec(rng, vh, 1))), benchBuffer(b, c, f32Bytes(randVec(rng, vh, 1)))
		for _, tier := range tiers {
			withTier(b, c, tier.exact)
			best := bestNsPerRep(b, c, 4, func(sq *Seq) {
				if tier.exact {
					sq.DeltaRule(x.All(), z.All(), beta.All(), g.All(), w.All(), st.All(), out.All(), s, kh, vh, m, cd, eps, float32(1/math.Sqrt(s)))
					return
				}
				sq.DeltaRuleFast(x.All(), z.All(), beta.All(), g.All(), dt.All(), a.All(), w.All(), st.All(), out.All(), s, kh, vh, m, cd, eps, float32(1/math.Sqrt(s)))
			}) / 1e3
			b.Logf("%s tier: %d rows: %.1f us a window, %.2f us a token", tier.name, m, best, best/float64(m))
			b.ReportMetric(best, fmt.Sprintf("%s-m%d-us", tier.name, m))
		}
	}
}
