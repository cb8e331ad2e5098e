package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Round-trip bounds, as the largest |x - dequant(quant(x))| over a block divided by the block's
// largest |x| (normal-distributed data with outliers, zero and constant blocks). The simple
// types' bounds follow from half a quantization step; the K-quant bounds also cover the
// rounding of sub-block scales to 4/6/8 bits.
var roundTripBound = map[Type]float64{
	F32:  0,
	F16:  1.0 / 2048, // half ulp of a 10-bit mantissa
	BF16: 1.0 / 256,  // half ulp of a 7-bit mantissa
	Q8_0: 0.5/127 + 1e-3,
	Q8_1: 0.5/127 + 1e-3,
	Q8_K: 0.5/127 + 1e-6,
	Q4_0: 1.0/8 + 1e-3, // d = max/-8: the side opposite the extreme clips at q=7, one full step
	Q5_0: 1.0/16 + 1e-3,
	Q4_1: 1.0/15 + 2e-3, // half step of a range of up to 2*amax
	Q5_1: 1.0/31 + 2e-3,
	// IQ4_NL: the side opposite the extreme (at -127) clips at 113, 14 codebook units; the
	// widest gap elsewhere is 24, half of it 12.
	IQ4_NL: 14.0/127 + 2e-3,
	// IQ4_XS: as IQ4_NL within a sub-block, plus its scale's rounding to 1/31 of the largest
	// sub-block scale (half of it, relative: 1/62).
	IQ4_XS: 14.0/127 + 1.0/62 + 2e-3,
	// MXFP4: the power-of-two scale leaves the block max in (3, 6] units; E2M1's widest gap is
	// 2 units (4 to 6), half of it one unit, over at least 3.
	MXFP4: 1.0/3 + 1e-3,
	// The grid i-quants: chunks of 8 (4) elements take the nearest of a few hundred grid points
	// and a group's smallest element may take the wrong sign (the stored signs' parity), so
	// these are the measured worst cases plus about 10%, not derived bounds.
	IQ2_XXS: 0.55,
	IQ2_XS:  0.45,
	IQ2_S:   0.38,
	IQ3_XXS: 0.36,
	IQ3_S:   0.19,
	Q2_K:    0.60,
	Q3_K:    0.30,
	Q4_K:    0.12,
	Q5_K:    0.06,
	Q6_K:    0.025,
}

func TestQuantizeDequantizeRoundTripWithinBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := randVec(r, 2048)
	for _, typ := range allTypes {
		t.Run(typ.String(), func(t *testing.T) {
			q, err := Quantize(typ, x)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := typ.RowBytes(len(x)); len(q) != n {
				t.Fatalf("quantized %d bytes, want %d", len(q), n)
			}
			y := make([]float32, len(x))
			if err := Dequantize(typ, q, y); err != nil {
				t.Fatal(err)
			}
			bs := max(typ.BlockSize(), 32)
			worst := 0.0
			for b := 0; b < len(x)/bs; b++ {
				amax := 0.0
				for _, v := range x[b*bs : (b+1)*bs] {
					amax = math.Max(amax, math.Abs(float64(v)))
				}
				for i := b * bs; i < (b+1)*bs; i++ {
					d := math.Abs(float64(x[i] - y[i]))
					if amax == 0 {
						if d != 0 {
							t.Fatalf("zero block element %d dequantized to %g", i, y[i])
						}
						continue
					}
					worst = math.Max(worst, d/amax)
				}
			}
			if bound := roundTripBound[typ]; worst > bound {
				t.Errorf("worst relative error %.4f exceeds bound %.4f", worst, bound)
			}
			t.Logf("%v worst error / block max = %.4f", typ, worst)
		})
	}
}

func TestQuantizeRejectsPartialBlocks(t *testing.T) {
	for _, typ := range []Type{Q4_0, Q8_0, Q4_K, Q6_K, Q2_K} {
		if _, err := Quantize(typ, make([]float32, typ.BlockSize()+1)); err == nil {
			t.Errorf("%v: want an error", typ)
		}
	}
	if _, err := Quantize(Type(77), make([]float32, 32)); err == nil {
		t.Error("unknown type: want an error")
	}
}

func TestQ8KBlockSumsAreQuantSums(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := randVec(r, 512)
	q, err := Quantize(Q8_K, x)
	if err != nil {
		t.Fatal(err)
	}
	for blk := 0; blk < 2; blk++ {
		b := (*[292]byte)(q[blk*292:])
		for g := 0; g < 16; g++ {
			var s int32
			for _, v := range b[4+16*g : 4+16*g+16] {
				s += int32(int8(v))
			}
			if got := bsum(b, g); got != s {
				t.Fatalf("block %d group %d: bsum %d, want %d", blk, g, got, s)
			}
		}
	}
}

func dot64(a, b []float32) (dot, mag float64) {
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		mag += math.Abs(float64(a[i]) * float64(b[i]))
	}
	return dot, mag
}

func dequant(t *testing.T, typ Type, b []byte, n int) []float32 {
	t.Helper()
	y := make([]float32, n)
	if err := Dequantize(typ, b, y); err != nil {
		t.Fatal(err)
	}
	return y
}

// testRows returns, per type, quantized rows to dot with: random data plus the hand-built block.
func testRow(t *testing.T, typ Type, r *rand.Rand, n int) []byte {
	q, err := Quantize(typ, randVec(r, n))
	if err != nil {
		t.Fatal(err)
	}
	for _, hb := range handBuiltBlocks() {
		if hb.typ == typ {
			copy(q[len(q)-len(hb.block):], hb.block)
		}
	}
	return q
}

var weightTypes = []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K}

// DotF32 must equal the float64 dot of the dequantized row within 1e-5 of sum|w*x|
// (float32 accumulation error only).
func TestDotF32MatchesDequantizedDot(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 1024
	x := randVec(r, n)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			row := testRow(t, typ, r, n)
			want, mag := dot64(dequant(t, typ, row, n), x)
			got := DotF32(typ, row, x)
			if d := math.Abs(float64(got) - want); d > 1e-5*mag {
				t.Errorf("DotF32 = %g, want %g (diff %g, allowed %g)", got, want, d, 1e-5*mag)
			}
		})
	}
}

// DotQuantized must equal the dot of the dequantized row with the dequantized activation
// within 1e-5 of sum|w*x| (the integer part is exact; for Q4_1/Q5_1 add the f16 rounding of
// Q8_1's s = d*sum(q), which llama.cpp uses for the min term: |m*s|/2048 per block), and stay within the activation's
// quantization error (2% of sum|w*x|, Q8 with 1/254 relative step) of the float dot.
func TestDotQuantizedMatchesDequantizedDot(t *testing.T) { checkDotQuantized(t) }

func checkDotQuantized(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{256, 4096 + 512} { // the second spans more than one assembly chunk
		x := randVec(r, n)
		for _, typ := range weightTypes {
			t.Run(typ.String(), func(t *testing.T) {
				row := testRow(t, typ, r, n)
				at := ActivationType(typ)
				xq := QuantizeActivation(typ, x, nil)
				w := dequant(t, typ, row, n)
				want, mag := dot64(w, dequant(t, at, xq, n))
				got := DotQuantized(typ, row, xq, n)
				allowed := 1e-5 * mag
				if at == Q8_1 {
					bb := typ.BlockBytes()
					for b := 0; b < n/32; b++ {
						allowed += math.Abs(float64(half(row[b*bb+2:])*half(xq[b*36+2:]))) / 2048
					}
				}
				if d := math.Abs(float64(got) - want); d > allowed {
					t.Errorf("n=%d DotQuantized = %g, want %g (diff %g, allowed %g)", n, got, want, d, allowed)
				}
				exact, emag := dot64(w, x)
				if d := math.Abs(float64(got) - exact); d > 0.02*emag {
					t.Errorf("n=%d DotQuantized = %g, float dot %g (diff %g > 2%% of %g)", n, got, exact, d, emag)
				}
			})
		}
	}
}

func TestActivationTypes(t *testing.T) {
	tests := map[Type]Type{
		F32: F32, F16: F32, BF16: F32,
		Q8_0: Q8_0, Q4_0: Q8_0, Q5_0: Q8_0, Q4_1: Q8_1, Q5_1: Q8_1,
		Q2_K: Q8_K, Q3_K: Q8_K, Q4_K: Q8_K, Q5_K: Q8_K, Q6_K: Q8_K,
	}
	for w, want := range tests {
		if got := ActivationType(w); got != want {
			t.Errorf("ActivationType(%v) = %v, want %v", w, got, want)
		}
	}
}

// The activation quantizer follows llama.cpp: d = amax/127 rounded to f16, q = round(x*127/amax),
// and Q8_1's s = d*sum(q).
func TestQuantizeActivationQ8Layout(t *testing.T) {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i-16) / 4 // amax = 4 at i=0
	}
	b := QuantizeActivation(Q4_0, x, nil)
	if len(b) != 34 {
		t.Fatalf("len = %d", len(b))
	}
	if got, want := half(b), F16ToF32(F32ToF16(4.0/127)); got != want {
		t.Errorf("d = %g, want %g", got, want)
	}
	sum := 0
	for i := range x {
		want := int(math.RoundToEven(float64(x[i] * (127 / float32(4)))))
		sum += want
		if got := int(int8(b[2+i])); got != want {
			t.Errorf("q[%d] = %d, want %d", i, got, want)
		}
	}
	b1 := QuantizeActivation(Q4_1, x, make([]byte, 0, 100))
	if got, want := half(b1[2:]), F16ToF32(F32ToF16(half(b1)*float32(sum))); got != want {
		t.Errorf("Q8_1 s = %g, want %g", got, want)
	}
	buf := make([]byte, 400)
	if got := QuantizeActivation(Q4_K, make([]float32, 256), buf); &got[0] != &buf[0] || len(got) != 292 {
		t.Error("QuantizeActivation did not reuse a large enough dst")
	}
}

// For F16/BF16 weights the activation keeps the F32 layout but is rounded to the weight's
// precision, as llama.cpp converts it to the weight type.
func TestQuantizeActivationRoundsToFloatWeightPrecision(t *testing.T) {
	x := []float32{1 + 1.0/4096, 1 + 3.0/4096, 65519, 1e-8, -3.14159265}
	tests := []struct {
		weight Type
		want   []float32
	}{
		{F32, x},
		{F16, []float32{1, 1 + 1.0/1024, 65504, 0, -3.140625}},
		{BF16, []float32{1, 1, 65536, math.Float32frombits(0x322c0000), -3.140625}}, // 1e-8 = 0x322bcc77 rounds up
	}
	for _, tc := range tests {
		b := QuantizeActivation(tc.weight, x, nil)
		got := dequant(t, F32, b, len(x))
		for i := range x {
			if got[i] != tc.want[i] {
				t.Errorf("%v: element %d = %g, want %g", tc.weight, i, got[i], tc.want[i])
			}
		}
	}
}

func TestMatVecMatchesDotQuantizedPerRow(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const rows, cols = 5, 512
	x := randVec(r, cols)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			w, err := Quantize(typ, randVec(r, rows*cols))
			if err != nil {
				t.Fatal(err)
			}
			rb, _ := typ.RowBytes(cols)
			out := make([]float32, rows)
			MatVec(typ, w, rows, cols, x, out)
			xq := QuantizeActivation(typ, x, nil)
			outQ := make([]float32, rows)
			MatVecQuantized(typ, w, rows, cols, xq, outQ)
			for i := 0; i < rows; i++ {
				want := DotQuantized(typ, w[i*rb:(i+1)*rb], xq, cols)
				if out[i] != want || outQ[i] != want {
					t.Errorf("row %d: MatVec %g, MatVecQuantized %g, want %g", i, out[i], outQ[i], want)
				}
			}
		})
	}
}

func TestDotQuantizedDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	x := randVec(r, 1024)
	for _, typ := range weightTypes {
		row := testRow(t, typ, r, 1024)
		xq := QuantizeActivation(typ, x, nil)
		if a := testing.AllocsPerRun(10, func() { DotQuantized(typ, row, xq, 1024) }); a != 0 {
			t.Errorf("%v: %v allocations per call", typ, a)
		}
	}
}

// DotQuantizedBatch must give DotQuantized's results (within 1e-6 of sum|w*x|, the float32
// accumulation order may differ) for every batch size around the 4-vector kernels' grouping.
func TestDotQuantizedBatchMatchesDotQuantized(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const n = 1024
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			row := testRow(t, typ, r, n)
			w := dequant(t, typ, row, n)
			var xqs [][]byte
			for k := 0; k < 9; k++ {
				xqs = append(xqs, QuantizeActivation(typ, randVec(r, n), nil))
			}
			for count := 0; count <= len(xqs); count++ {
				out := make([]float32, count+1)
				out[count] = 42
				DotQuantizedBatch(typ, row, xqs[:count], n, out)
				for i := 0; i < count; i++ {
					want := DotQuantized(typ, row, xqs[i], n)
					_, mag := dot64(w, dequant(t, ActivationType(typ), xqs[i], n))
					if d := math.Abs(float64(out[i] - want)); d > 1e-6*mag {
						t.Errorf("batch of %d, vector %d: %g, DotQuantized %g", count, i, out[i], want)
					}
				}
				if out[count] != 42 {
					t.Errorf("batch of %d wrote past its outputs", count)
				}
			}
		})
	}
}
