package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

func randomRow(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// The assembly kernels must give exactly the portable kernels' bits (same summation order),
// and both must equal the exact dot product of the dequantized operands to float rounding.
func TestLlamaOrderDotsAgreeBitForBitAndWithDequantizedMath(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0} {
		for _, n := range []int{32, 64, 96, 256, 4096} {
			w, err := quant.Quantize(typ, randomRow(r, n))
			if err != nil {
				t.Fatal(err)
			}
			xq := quant.QuantizeActivation(typ, randomRow(r, n), nil)
			got, ok := llamaOrderDot(typ, w, xq, n)
			if !ok {
				t.Fatalf("%s: not covered", typ)
			}
			var portable float32
			if typ == quant.Q8_0 {
				portable = dotQ8_0Go(w, xq)
			} else {
				portable = dotQ4_0Go(w, xq)
			}
			if math.Float32bits(got) != math.Float32bits(portable) {
				t.Fatalf("%s n=%d: kernel %v, portable %v", typ, n, got, portable)
			}
			wd := make([]float32, n)
			xd := make([]float32, n)
			if err := quant.Dequantize(typ, w, wd); err != nil {
				t.Fatal(err)
			}
			if err := quant.Dequantize(quant.Q8_0, xq, xd); err != nil {
				t.Fatal(err)
			}
			var exact, mag float64
			for i := range wd {
				exact += float64(wd[i]) * float64(xd[i])
				mag += math.Abs(float64(wd[i]) * float64(xd[i]))
			}
			if math.Abs(float64(got)-exact) > 1e-5*mag {
				t.Fatalf("%s n=%d: %v, dequantized float64 dot %v", typ, n, got, exact)
			}
		}
	}
}

func TestLlamaOrderDotLeavesOtherTypesToQuant(t *testing.T) {
	if _, ok := llamaOrderDot(quant.Q4_K, nil, nil, 256); ok {
		t.Fatal("Q4_K claimed by the llama-order kernels")
	}
}

func TestFourRowKernelsEqualFourSingleDots(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0} {
		for _, n := range []int{32, 256, 768} {
			w, err := quant.Quantize(typ, randomRow(r, n))
			if err != nil {
				t.Fatal(err)
			}
			var xs [4][]byte
			for i := range xs {
				xs[i] = quant.QuantizeActivation(typ, randomRow(r, n), nil)
			}
			var got [4]float32
			if !llamaOrderDot4(typ, w, &xs, n, &got) {
				t.Skipf("skipping: no four-row kernel on this CPU")
			}
			for i := range xs {
				want, _ := llamaOrderDot(typ, w, xs[i], n)
				if math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("%s n=%d row %d: four-row kernel %v, single %v", typ, n, i, got[i], want)
				}
			}
		}
	}
}

func TestVNNIKernelEqualsFourSingleDots(t *testing.T) {
	if !vnni {
		t.Skip("skipping: this CPU has no AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{32, 256, 768} {
		w, err := quant.Quantize(quant.Q8_0, randomRow(r, n))
		if err != nil {
			t.Fatal(err)
		}
		w[2] = 0x80 // -128, outside what quantizing produces, still multiplied exactly
		var xs, xv [4][]byte
		for i := range xs {
			xs[i] = quant.QuantizeActivation(quant.Q8_0, randomRow(r, n), nil)
			xv[i] = vnniActivation(xs[i], nil)
		}
		w1, err := quant.Quantize(quant.Q8_0, randomRow(r, n))
		if err != nil {
			t.Fatal(err)
		}
		var got [4]float32
		if !vnniDot4(w, &xv, n, &got) {
			t.Fatal("vnniDot4 declined on a VNNI CPU")
		}
		for i := range xs {
			want, _ := llamaOrderDot(quant.Q8_0, w, xs[i], n)
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d token %d: VNNI kernel %v, single %v", n, i, got[i], want)
			}
		}
		// the two-row kernel over two groups: the four tokens, then them in reverse
		ptrs := []*byte{&xv[0][0], &xv[1][0], &xv[2][0], &xv[3][0], &xv[3][0], &xv[2][0], &xv[1][0], &xv[0][0]}
		got2 := make([]float32, 16)
		if !vnniDot2xN(w, w1, ptrs, len(xv[0]), n, got2) {
			t.Fatal("vnniDot2xN declined on a VNNI CPU")
		}
		for k, i := range []int{0, 1, 2, 3, 3, 2, 1, 0} {
			g, j := k/4, k%4
			want, _ := llamaOrderDot(quant.Q8_0, w, xs[i], n)
			want1, _ := llamaOrderDot(quant.Q8_0, w1, xs[i], n)
			if math.Float32bits(got2[8*g+j]) != math.Float32bits(want) || math.Float32bits(got2[8*g+4+j]) != math.Float32bits(want1) {
				t.Fatalf("n=%d group %d token %d: two-row VNNI kernel %v %v, single %v %v", n, g, i, got2[8*g+j], got2[8*g+4+j], want, want1)
			}
		}
	}
}
