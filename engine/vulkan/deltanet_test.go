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

// delta_rule_64 and delta_rule_128 against the float64 reference over three tokens from a
// random state, value heads twice the key heads: every output and state value within 1e-4 ·
// max(1, |ref|) (f32 sums of S products of unit-scale values, measured 1.5e-6 on lavapipe; a
// wrong head mapping, decay or norm is off by far more). Negative control: the reference with value head h reading key head
// h / (vh/kh) (grouped, not interleaved) differs from the kernel by more than that.
func TestDeltaRuleMatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	const kh, vh, m = 2, 4, 3
	const eps = 1e-6
	for _, s := range []int{64, 128} {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(s)))
			cd, vd := 2*kh*s+vh*s, vh*s
			x, z, w := randVec(rng, m*cd, 1), randVec(rng, m*vd, 1), randVec(rng, s, 1)
			st := randVec(rng, vh*s*s, 0.1)
			beta, g := make([]float32, m*vh), make([]float32, m*vh)
			for i := range beta {
				beta[i] = float32(rng.Float64())
				g[i] = float32(-0.5 * rng.Float64())
			}
			stB, out := upload(t, c, st), zeros(t, c, m*vd)
			run(t, c, func(sq *Seq) {
				sq.DeltaRule(upload(t, c, x).All(), upload(t, c, z).All(), upload(t, c, beta).All(), upload(t, c, g).All(), upload(t, c, w).All(),
					stB.All(), out.All(), s, kh, vh, m, cd, eps, float32(1/math.Sqrt(float64(s))))
			})
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
			t.Logf("outputs within %.2g, state within %.2g", dO, dS)
			if dO > 1e-4 || dS > 1e-4 {
				t.Errorf("outputs off by %.3g, state by %.3g (relative, tolerance 1e-4)", dO, dS)
			}
			control := deltaRuleRef(x, z, beta, g, w, append([]float32(nil), st...), s, kh, vh, m, eps, true)
			if d := worst(gotO, control); d <= 1e-4 {
				t.Errorf("negative control: value heads grouped by h / (vh/kh) give outputs within %.3g of the kernel", d)
			}
		})
	}
}
