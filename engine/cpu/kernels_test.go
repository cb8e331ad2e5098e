package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/quant"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

func TestRMSNormScalesToUnitRootMeanSquare(t *testing.T) {
	x := []float32{1, 2, 3, 4}
	w := []float32{1, 1, 2, 0.5}
	out := make([]float32, 4)
	rmsNorm(out, x, w, 0)
	rms := math.Sqrt((1 + 4 + 9 + 16) / 4.0)
	for i := range x {
		want := float64(x[i]) / rms * float64(w[i])
		if !near(float64(out[i]), want, 1e-6) {
			t.Fatalf("out[%d] = %v, want %v", i, out[i], want)
		}
	}
}

func TestRMSNormEpsilonKeepsZeroVectorFinite(t *testing.T) {
	x := make([]float32, 8)
	w := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	rmsNorm(x, x, w, 1e-6)
	for _, v := range x {
		if v != 0 {
			t.Fatalf("zero input normalised to %v", x)
		}
	}
}

func TestSoftmaxSumsToOneAndKeepsOrder(t *testing.T) {
	x := []float32{1000, 999, 0, -1000}
	softmax(x)
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	if !near(sum, 1, 1e-6) || !(x[0] > x[1] && x[1] > x[2] && x[2] >= x[3]) {
		t.Fatalf("softmax = %v (sum %v)", x, sum)
	}
	if !near(float64(x[0]), 1/(1+math.Exp(-1)), 1e-6) {
		t.Fatalf("softmax[0] = %v, want %v", x[0], 1/(1+math.Exp(-1)))
	}
}

func TestSwiGLU(t *testing.T) {
	g := []float32{0, 1, -2}
	u := []float32{5, 2, 3}
	swiglu(g, u)
	want := []float64{0, 2 / (1 + math.Exp(-1)), 3 * -2 / (1 + math.Exp(2))}
	for i := range want {
		if !near(float64(g[i]), want[i], 1e-6) {
			t.Fatalf("swiglu[%d] = %v, want %v", i, g[i], want[i])
		}
	}
}

func TestRopeAtPositionZeroIsIdentity(t *testing.T) {
	for _, neox := range []bool{false, true} {
		r := newRope(8, 10000, 1, neox, nil)
		x := []float32{1, 2, 3, 4, 5, 6, 7, 8}
		want := append([]float32(nil), x...)
		r.apply(x, 8, 0)
		for i := range x {
			if !near(float64(x[i]), float64(want[i]), 1e-7) {
				t.Fatalf("neox=%v: %v changed at position 0 to %v", neox, want, x)
			}
		}
	}
}

func TestRopeRotatesThePairsEachModeDefines(t *testing.T) {
	// dims 4, base 100: pair 0 turns by pos, pair 1 by pos/10
	const pos = 3
	cases := []struct {
		name  string
		neox  bool
		pairs [][2]int
	}{
		{"normal rotates adjacent pairs", false, [][2]int{{0, 1}, {2, 3}}},
		{"neox rotates halves", true, [][2]int{{0, 2}, {1, 3}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRope(4, 100, 1, tc.neox, nil)
			x := []float32{1, 2, 3, 4, 9} // a 5th dimension beyond rope dims passes through
			orig := append([]float32(nil), x...)
			r.apply(x, 5, pos)
			for i, p := range tc.pairs {
				theta := pos * math.Pow(100, -2*float64(i)/4)
				a, b := float64(orig[p[0]]), float64(orig[p[1]])
				wantA := a*math.Cos(theta) - b*math.Sin(theta)
				wantB := a*math.Sin(theta) + b*math.Cos(theta)
				if !near(float64(x[p[0]]), wantA, 1e-5) || !near(float64(x[p[1]]), wantB, 1e-5) {
					t.Fatalf("pair %v: got (%v,%v) want (%v,%v)", p, x[p[0]], x[p[1]], wantA, wantB)
				}
			}
			if x[4] != 9 {
				t.Fatalf("dimension past rope dims changed: %v", x[4])
			}
		})
	}
}

func TestRopeFreqScaleAndFactorsSlowTheRotation(t *testing.T) {
	base := newRope(4, 100, 1, false, nil)
	scaled := newRope(4, 100, 0.5, false, nil)
	factored := newRope(4, 100, 1, false, []float32{2, 2})
	a := []float32{1, 0, 1, 0}
	b := append([]float32(nil), a...)
	c := append([]float32(nil), a...)
	base.apply(a, 4, 2)
	scaled.apply(b, 4, 4)   // half the frequency at twice the position
	factored.apply(c, 4, 4) // the same through frequency factors
	for i := range a {
		if !near(float64(a[i]), float64(b[i]), 1e-6) || !near(float64(a[i]), float64(c[i]), 1e-6) {
			t.Fatalf("pos 2 = %v, scaled pos 4 = %v, factored pos 4 = %v", a, b, c)
		}
	}
}

func TestPoolCoversEveryIndexOnce(t *testing.T) {
	p := newPool(4)
	defer p.close()
	for _, n := range []int{0, 1, 3, 4, 5, 17, 1000} {
		for _, minChunk := range []int{1, 7, 2000} {
			hits := make([]int32, n)
			p.parallel(n, minChunk, func(_, lo, hi int) {
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("n=%d minChunk=%d: index %d visited %d times", n, minChunk, i, h)
				}
			}
		}
	}
}

func TestKVCacheGrowsAndTruncates(t *testing.T) {
	for _, typ := range []KVType{KVF16, KVF32} {
		c := newKVCache(typ, 1, 2, 2, 100)
		for pos := 0; pos < 40; pos++ {
			c.store(0, pos, []float32{float32(pos), 1}, []float32{2, float32(pos)})
		}
		c.truncate(10)
		c.store(0, 10, []float32{0.5, 0.5}, []float32{0.5, 0.5})
		// a query that only looks at keys: equal scores over 0..10 average the values
		out := make([]float32, 2)
		c.attendHead(0, 10, []float32{0, 0}, 0, 0, 1, &attnScratch{}, out)
		wantSecond := (45.0 + 0.5) / 11 // values 0..9 and the overwritten 0.5
		if !near(float64(out[0]), (2*10+0.5)/11, 1e-3) || !near(float64(out[1]), wantSecond, 1e-3) {
			t.Fatalf("%s: attention over a truncated cache = %v, want [%v %v]", typ, out, (2*10+0.5)/11, wantSecond)
		}
	}
}

func TestPoolRunsLoopsAfterItsWorkersPark(t *testing.T) {
	p := newPool(3)
	for round := 0; round < 3; round++ {
		time.Sleep(20 * time.Millisecond) // long past the spin phase: every worker has parked
		var sum atomic.Int64
		p.parallel(3000, 1, func(w, lo, hi int) {
			for i := lo; i < hi; i++ {
				sum.Add(int64(i))
			}
		})
		if got, want := sum.Load(), int64(3000*2999/2); got != want {
			t.Fatalf("round %d: sum of indices %d, want %d", round, got, want)
		}
	}
	done := make(chan struct{})
	go func() { p.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return with parked workers")
	}
}

// The assembly forms of the f16 attention kernels must give the portable forms' bits, over
// lengths with and without a tail and values from subnormal to large.
func TestF16AttentionKernelsMatchPortableForms(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	half := func(scale float64) uint16 { return quant.F32ToF16(float32(r.NormFloat64() * scale)) }
	for _, n := range []int{1, 8, 13, 64, 128} {
		for _, scale := range []float64{1e-6, 1, 300} {
			q := make([]float32, n)
			k := make([]uint16, n)
			v := make([]uint16, n)
			acc := make([]uint16, n)
			for i := range q {
				q[i] = quant.F16ToF32(half(scale))
				k[i], v[i], acc[i] = half(scale), half(scale), half(scale)
			}
			if got, want := dotF16(q, k), dotF16Go(q, k); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("n=%d scale %g: dotF16 %v, portable %v", n, scale, got, want)
			}
			// three key rows at a stride of n+3: k, k reversed, v
			rev := slices.Clone(k)
			slices.Reverse(rev)
			keys := slices.Concat(k, []uint16{1, 2, 3}, rev, []uint16{4, 5, 6}, v)
			scores := make([]float32, 3)
			if dotF16Rows(q, keys, n+3, 0.125, scores) {
				for i, row := range [][]uint16{k, rev, v} {
					if want := dotF16Go(q, row) * 0.125; math.Float32bits(scores[i]) != math.Float32bits(want) {
						t.Fatalf("n=%d scale %g row %d: dotF16Rows %v, portable %v", n, scale, i, scores[i], want)
					}
				}
			}
			for _, s := range []float32{0, 0.37, 1, 1.9} {
				got, want := append([]uint16(nil), acc...), append([]uint16(nil), acc...)
				madF16(got, v, s)
				madF16Go(want, v, s)
				if !slices.Equal(got, want) {
					t.Fatalf("n=%d scale %g s=%v: madF16 %v, portable %v", n, scale, s, got, want)
				}
				got, want = append(got[:0], acc...), append(want[:0], acc...)
				scaleF16(got, s)
				scaleF16Go(want, s)
				if !slices.Equal(got, want) {
					t.Fatalf("n=%d scale %g s=%v: scaleF16 %v, portable %v", n, scale, s, got, want)
				}
			}
		}
	}
}

func TestExp32AgreesWithMathExpRoundedToFloat32(t *testing.T) {
	check := func(x float32) {
		t.Helper()
		want := float32(math.Exp(float64(x)))
		got := exp32(x)
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("exp32(%v) = %v, float32(math.Exp) = %v", x, got, want)
		}
	}
	for _, x := range []float32{0, -0.0, 1, -1, 88.7, 88.73, 89, 89.5, -87.3, -103.2, -103.97, -104, -104.5,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.SmallestNonzeroFloat32, 1e-30} {
		check(x)
	}
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 300000; i++ {
		check(float32(r.Float64()*190 - 100))   // the whole range
		check(float32(-r.ExpFloat64() * 3))     // softmax arguments: mostly small and negative
		check(math.Float32frombits(r.Uint32())) // every exponent, NaNs included
	}
}

// The register-held value accumulation must give the bits of the per-position one.
func TestSequentialF16AccumulationMatchesPerPositionSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, np := range []int{1, 5, 100} {
		for _, stride := range []int{64, 192} {
			v := make([]uint16, np*stride)
			for i := range v {
				v[i] = quant.F32ToF16(float32(r.NormFloat64() * 3))
			}
			ms, vs := make([]float32, np), make([]float32, np)
			for i := range ms {
				ms[i], vs[i] = 1, float32(r.Float64())
				if i == 0 || r.IntN(4) == 0 { // a new maximum: rescale, weight 1
					ms[i], vs[i] = float32(r.Float64()), 1
				}
			}
			got := make([]float32, 64)
			if !madF16Seq(got, v, stride, ms, vs) {
				t.Skip("skipping: no sequential accumulation kernel on this platform")
			}
			acc := make([]uint16, 64)
			for i := range ms {
				scaleF16Go(acc, ms[i])
				madF16Go(acc, v[i*stride:i*stride+64], vs[i])
			}
			for d, a := range acc {
				if want := quant.F16ToF32(a); math.Float32bits(got[d]) != math.Float32bits(want) {
					t.Fatalf("np=%d stride=%d dim %d: %v, per-position steps %v", np, stride, d, got[d], want)
				}
			}
		}
	}
}
