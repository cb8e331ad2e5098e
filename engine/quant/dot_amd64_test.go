//go:build amd64 && !purego

package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// forcePureGo switches the assembly kernels off until the returned function runs.
func forcePureGo() (restore func()) {
	saved := hasAVX2
	hasAVX2 = false
	return func() { hasAVX2 = saved }
}

// The assembly kernels must agree with the pure Go kernels (the reference and the fallback)
// within float32 accumulation-order error: 1e-6 of sum|w*x| over the dequantized values.
func TestAssemblyKernelsMatchPureGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("CPU lacks AVX2/FMA/F16C: only the pure Go kernels run here")
	}
	r := rand.New(rand.NewPCG(21, 22))
	kernels := []struct {
		typ      Type
		asm, go_ func(w, x []byte) float32
	}{
		{Q8_0, dotQ8_0, dotQ8_0Go},
		{Q4_0, dotQ4_0, dotQ4_0Go},
		{Q5_0, dotQ5_0, dotQ5_0Go},
		{Q4_1, dotQ4_1, dotQ4_1Go},
		{Q5_1, dotQ5_1, dotQ5_1Go},
		{Q2_K, dotQ2K, dotQ2KGo},
		{Q3_K, dotQ3K, dotQ3KGo},
		{Q4_K, dotQ4K, dotQ4KGo},
		{Q5_K, dotQ5K, dotQ5KGo},
		{Q6_K, dotQ6K, dotQ6KGo},
	}
	for _, k := range kernels {
		t.Run(k.typ.String(), func(t *testing.T) {
			// Block counts around the unroll and chunk boundaries (K: 16 super-blocks per call).
			for _, n := range []int{256, 512, 768, 4096, 4352, 8192 + 256} {
				x := randVec(r, n)
				w := randVec(r, n)
				for i := range w { // extremes: saturating scales and quants
					if i%97 == 0 {
						w[i] *= 50
					}
				}
				row := testRow(t, k.typ, r, n)
				if n == 768 {
					row, _ = Quantize(k.typ, w)
				}
				xq := QuantizeActivation(k.typ, x, nil)
				got, want := k.asm(row, xq), k.go_(row, xq)
				_, mag := dot64(dequant(t, k.typ, row, n), dequant(t, ActivationType(k.typ), xq, n))
				if d := math.Abs(float64(got - want)); d > 1e-6*mag {
					t.Errorf("n=%d assembly %g, pure Go %g (diff %g > %g)", n, got, want, d, 1e-6*mag)
				}
			}
		})
	}
}

// TestPureGoDotQuantizedMatchesDequantizedDot runs the public dot path with the assembly
// kernels switched off, as on CPUs without AVX2 or on other architectures.
func TestPureGoDotQuantizedMatchesDequantizedDot(t *testing.T) {
	defer forcePureGo()()
	checkDotQuantized(t)
}

func TestAssemblyFloatKernelsMatchPureGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("CPU lacks AVX2/FMA/F16C: only the pure Go kernels run here")
	}
	r := rand.New(rand.NewPCG(23, 24))
	for _, n := range []int{1, 31, 32, 33, 100, 4096, 4096 + 7} {
		x := randVec(r, n)
		w := randVec(r, n)
		kernels := map[Type][2]func([]byte, []float32) float32{
			F32:  {dotF32, dotF32Go},
			F16:  {dotF16, dotF16Go},
			BF16: {dotBF16, dotBF16Go},
		}
		for typ, k := range kernels {
			row, _ := Quantize(typ, w)
			got, want := k[0](row, x), k[1](row, x)
			_, mag := dot64(dequant(t, typ, row, n), x)
			if d := math.Abs(float64(got - want)); d > 1e-6*mag {
				t.Errorf("%v n=%d: assembly %g, pure Go %g (diff %g > %g)", typ, n, got, want, d, 1e-6*mag)
			}
		}
	}
}

func TestAssemblyF16RoundingMatchesPureGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("CPU lacks AVX2/FMA/F16C: only the pure Go kernels run here")
	}
	r := rand.New(rand.NewPCG(25, 26))
	x := make([]float32, 4096+5)
	for i := range x {
		x[i] = math.Float32frombits(r.Uint32()) // every exponent, NaN and inf included
	}
	x[0], x[1], x[2] = 65520, 1+1.0/2048, float32(math.Inf(-1)) // ties and overflow
	got, want := make([]float32, len(x)), make([]float32, len(x))
	roundF16(got, x)
	roundF16Go(want, x)
	for i := range x {
		g, w := got[i], want[i]
		if math.IsNaN(float64(w)) {
			if !math.IsNaN(float64(g)) {
				t.Fatalf("x[%d] = %g: got %g, want NaN", i, x[i], g)
			}
			continue
		}
		if math.Float32bits(g) != math.Float32bits(w) {
			t.Fatalf("x[%d] = %g (%#08x): assembly %g, pure Go %g", i, x[i], math.Float32bits(x[i]), g, w)
		}
	}
}
