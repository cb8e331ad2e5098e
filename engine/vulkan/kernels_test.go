package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// Kernel tests: each kernel on lavapipe (or whatever device is first) against a plain Go
// float64 reference on random inputs. Quantized weights are made with engine/quant and the
// reference dequantizes them with engine/quant, so the only difference allowed is float32
// accumulation order: |gpu - ref| <= 1e-5 · Σ|w·x| + 1e-6 for the matmuls.

func randVec(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * scale)
	}
	return v
}

func upload(t *testing.T, c *Context, v []float32) *Buffer {
	t.Helper()
	b, err := c.NewBuffer(uint64(4*len(v)), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteF32(0, v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	return b
}

func uploadBytes(t *testing.T, c *Context, v []byte) *Buffer {
	t.Helper()
	b, err := c.NewBuffer(uint64(len(v)), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(0, v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	return b
}

func uploadU32(t *testing.T, c *Context, v []uint32) *Buffer {
	t.Helper()
	b, err := c.NewBuffer(uint64(4*len(v)), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteU32(0, v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	return b
}

func zeros(t *testing.T, c *Context, n int) *Buffer {
	return upload(t, c, make([]float32, n))
}

func run(t *testing.T, c *Context, record func(s *Seq)) {
	t.Helper()
	s, err := c.NewSeq()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	record(s)
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
}

func readF32(t *testing.T, b *Buffer, n int) []float32 {
	t.Helper()
	v, err := b.ReadF32(0, n)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var weightTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K}

func TestMatMulMatchesDequantizedReferenceForEveryWeightType(t *testing.T) {
	c := ctxOrSkip(t)
	// The shared-memory tier on every device (coopmat_test.go checks the cooperative-matrix one).
	prev := c.gemm
	c.gemm = gemmShared
	t.Cleanup(func() { c.gemm = prev })
	const n = 37
	for _, k := range []int{512, 1280} { // 1280: the fast matvec's 512-element passes, the last one partial
		for _, tier := range tiers {
			for _, typ := range weightTypes {
				// ownRows: every subgroup takes its own rows in matvec_fast, as on grids of many
				// rows (37 rows share each workgroup's rows among its subgroups otherwise).
				for _, tc := range []struct {
					m, lanes int
					ownRows  bool
				}{{1, 0, false}, {1, 0, true}, {1, 16, false}, {11, 0, false}} {
					m := tc.m
					name := fmt.Sprintf("k%d/%s/%v/tokens%d", k, tier.name, typ, m)
					if tc.lanes != 0 {
						name += fmt.Sprintf("/lanes%d", tc.lanes) // a GPU's row layout, on any device
					}
					if tc.ownRows {
						name += "/own-rows"
					}
					t.Run(name, func(t *testing.T) {
						withTier(t, c, tier.exact)
						c.lanes = tc.lanes
						prevShare := c.matvecShareBelow
						if tc.ownRows {
							c.matvecShareBelow = 0
						}
						defer func() { c.lanes, c.matvecShareBelow = 0, prevShare }()
						rng := rand.New(rand.NewSource(int64(typ)*100 + int64(m)))
						wf := randVec(rng, k*n, 0.5)
						wq, err := quant.Quantize(typ, wf)
						if err != nil {
							t.Fatal(err)
						}
						wd := make([]float32, k*n)
						if err := quant.Dequantize(typ, wq, wd); err != nil {
							t.Fatal(err)
						}
						x := randVec(rng, k*m, 1)
						if typ == quant.Q4_0 || typ == quant.Q8_0 {
							x = roundedQ8_0(t, x, k) // what their products see (the fast matvec rounds again, to the same values)
						}
						wb, xb := uploadBytes(t, c, wq), upload(t, c, x)
						// Y starts at 1 to check that accumulate adds and plain overwrites.
						ones := make([]float32, n*m)
						for i := range ones {
							ones[i] = 1
						}
						yb, ya := upload(t, c, ones), upload(t, c, ones)
						run(t, c, func(s *Seq) {
							s.MatMul(typ, wb.All(), xb.All(), yb.All(), k, n, m, k, n, false)
							s.MatMul(typ, wb.All(), xb.All(), ya.All(), k, n, m, k, n, true)
						})
						got, gotAcc := readF32(t, yb, n*m), readF32(t, ya, n*m)
						worst := 0.0
						for tok := 0; tok < m; tok++ {
							for r := 0; r < n; r++ {
								var ref, mag float64
								for i := 0; i < k; i++ {
									p := float64(wd[r*k+i]) * float64(x[tok*k+i])
									ref += p
									mag += math.Abs(p)
								}
								tol := 1e-5*mag + 1e-6
								e := math.Abs(float64(got[tok*n+r]) - ref)
								ea := math.Abs(float64(gotAcc[tok*n+r]) - (ref + 1))
								if e > tol || ea > tol {
									t.Fatalf("token %d row %d: got %v (accumulated %v), want %v (+1), tol %g", tok, r, got[tok*n+r], gotAcc[tok*n+r], ref, tol)
								}
								worst = math.Max(worst, e/mag)
							}
						}
						t.Logf("max |err|/Σ|w·x| = %.2g", worst)
					})
				}
			}
		}
	}
}

// roundedQ8_0 returns x (rows of k) rounded to Q8_0 blocks as quant.QuantizeActivation
// rounds the input of a Q4_0 product (what the driver's quantact pass hands the kernel).
func roundedQ8_0(t *testing.T, x []float32, k int) []float32 {
	t.Helper()
	out := make([]float32, len(x))
	for r := 0; r+k <= len(x); r += k {
		enc := quant.QuantizeActivation(quant.Q4_0, x[r:r+k], nil)
		if err := quant.Dequantize(quant.Q8_0, enc, out[r:r+k]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// llamaOrderQ4_0 is one Q4_0 row times one Q8_0-encoded activation row in llama.cpp's CPU
// order: per block the integer sum s, then acc = fma(s, d_w·d_x, acc) block after block.
func llamaOrderQ4_0(w, x []byte) float32 {
	f16 := func(b []byte) float32 { return quant.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }
	var acc float32
	for b, c := 0, 0; b+18 <= len(w); b, c = b+18, c+34 {
		var s int32
		for j := 0; j < 16; j++ {
			s += (int32(w[b+2+j]&15) - 8) * int32(int8(x[c+2+j]))
			s += (int32(w[b+2+j]>>4) - 8) * int32(int8(x[c+18+j]))
		}
		acc = float32(math.FMA(float64(s), float64(f16(w[b:])*f16(x[c:])), float64(acc)))
	}
	return acc
}

// llamaOrderQ8_0 is one Q8_0 row times one Q8_0 activation row in llama.cpp's CPU order:
// eight float lanes, lane l = fma(d_w·d_x, s_l, lane l) per block with s_l the integer sum of
// products 4l..4l+3, then (l0+l4 + l2+l6) + (l1+l5 + l3+l7).
func llamaOrderQ8_0(w, x []byte) float32 {
	f16 := func(b []byte) float32 { return quant.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }
	var lanes [8]float32
	for b := 0; b+34 <= len(w); b += 34 {
		d := f16(w[b:]) * f16(x[b:])
		for l := range lanes {
			var s int32
			for i := 2 + 4*l; i < 6+4*l; i++ {
				s += int32(int8(w[b+i])) * int32(int8(x[b+i]))
			}
			lanes[l] = float32(math.FMA(float64(d), float64(s), float64(lanes[l])))
		}
	}
	return ((lanes[4] + lanes[0]) + (lanes[6] + lanes[2])) + ((lanes[5] + lanes[1]) + (lanes[7] + lanes[3]))
}

// The Q4_0 and Q8_0 matvec and GEMM are bit-identical to llama.cpp's CPU summation, with and
// without accumulation into Y: for quantized models a last-bit difference decides how the next
// layer's activations round to 8 bits, and greedy output drifts from the reference.
func TestQ8_0BlockMatMulIsBitIdenticalToLlamaOrder(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, true)
	prev := c.gemm
	c.gemm = gemmShared
	t.Cleanup(func() { c.gemm = prev })
	for _, tc := range []struct {
		typ     quant.Type
		k, n, m int
	}{
		{quant.Q4_0, 704, 45, 1}, {quant.Q4_0, 256, 130, 1}, {quant.Q4_0, 704, 37, 11}, {quant.Q4_0, 4096, 9, 3},
		{quant.Q8_0, 704, 45, 1}, {quant.Q8_0, 256, 130, 1}, {quant.Q8_0, 704, 37, 11}, {quant.Q8_0, 4096, 9, 3},
	} {
		t.Run(fmt.Sprintf("%v/k%d/rows%d/tokens%d", tc.typ, tc.k, tc.n, tc.m), func(t *testing.T) {
			k, n, m := tc.k, tc.n, tc.m
			rng := rand.New(rand.NewSource(int64(k*n + m)))
			wq, err := quant.Quantize(tc.typ, randVec(rng, k*n, 0.5))
			if err != nil {
				t.Fatal(err)
			}
			x := randVec(rng, k*m, 1.5)
			x[3] = 0 // a zero inside a block
			for i := 32; i < 64; i++ {
				x[i] = 0 // an all-zero block (scale 0)
			}
			xr := roundedQ8_0(t, x, k)
			base := randVec(rng, n*m, 3)
			wb, xb := uploadBytes(t, c, wq), upload(t, c, xr)
			yb, ya := zeros(t, c, n*m), upload(t, c, base)
			run(t, c, func(s *Seq) {
				s.MatMul(tc.typ, wb.All(), xb.All(), yb.All(), k, n, m, k, n, false)
				s.MatMul(tc.typ, wb.All(), xb.All(), ya.All(), k, n, m, k, n, true)
			})
			got, gotAcc := readF32(t, yb, n*m), readF32(t, ya, n*m)
			rowBytes, dot := k/32*18, llamaOrderQ4_0
			if tc.typ == quant.Q8_0 {
				rowBytes, dot = k/32*34, llamaOrderQ8_0
			}
			for tok := 0; tok < m; tok++ {
				enc := quant.QuantizeActivation(tc.typ, x[tok*k:(tok+1)*k], nil)
				for r := 0; r < n; r++ {
					want := dot(wq[r*rowBytes:(r+1)*rowBytes], enc)
					i := tok*n + r
					if got[i] != want || gotAcc[i] != base[i]+want {
						t.Fatalf("token %d row %d: got %v (accumulated %v), want exactly %v (%v)", tok, r, got[i], gotAcc[i], want, base[i]+want)
					}
				}
			}
		})
	}
}

func TestMatMulRejectsRowsNotWholeBlocks(t *testing.T) {
	c := ctxOrSkip(t)
	b := zeros(t, c, 1024)
	s, err := c.NewSeq()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	s.MatMul(quant.Q4_K, b.All(), b.All(), b.All(), 128, 2, 1, 128, 2, false)
	if err := s.End(); err == nil {
		t.Fatal("Q4_K rows of 128 elements accepted")
	}
}

func TestEmbedGathersDequantizedRows(t *testing.T) {
	c := ctxOrSkip(t)
	const k, rows = 256, 10
	ids := []uint32{3, 0, 9, 3}
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(typ)))
			wq, err := quant.Quantize(typ, randVec(rng, k*rows, 1))
			if err != nil {
				t.Fatal(err)
			}
			wd := make([]float32, k*rows)
			if err := quant.Dequantize(typ, wq, wd); err != nil {
				t.Fatal(err)
			}
			wb, ib, xb := uploadBytes(t, c, wq), uploadU32(t, c, ids), zeros(t, c, k*len(ids))
			run(t, c, func(s *Seq) { s.Embed(typ, wb.All(), ib.All(), xb.All(), k, len(ids), 0, rows, k) })
			got := readF32(t, xb, k*len(ids))
			for tk, id := range ids {
				for i := 0; i < k; i++ {
					want := wd[int(id)*k+i]
					if d := math.Abs(float64(got[tk*k+i] - want)); d > 1e-6*math.Max(1, math.Abs(float64(want))) {
						t.Fatalf("token %d (row %d) element %d: got %v, want %v", tk, id, i, got[tk*k+i], want)
					}
				}
			}
		})
	}
}

// A table split in two slices (rows 0..5 and 6..9) fills every token from the right slice.
func TestEmbedOverASplitTableWritesEachTokenOnce(t *testing.T) {
	c := ctxOrSkip(t)
	const k, rows, split = 64, 10, 6
	rng := rand.New(rand.NewSource(3))
	wq, err := quant.Quantize(quant.Q8_0, randVec(rng, k*rows, 1))
	if err != nil {
		t.Fatal(err)
	}
	wd := make([]float32, k*rows)
	if err := quant.Dequantize(quant.Q8_0, wq, wd); err != nil {
		t.Fatal(err)
	}
	rb := quant.Q8_0.BlockBytes() * k / quant.Q8_0.BlockSize()
	lo, hi := uploadBytes(t, c, wq[:split*rb]), uploadBytes(t, c, wq[split*rb:])
	ids := []uint32{9, 2, 6, 5}
	ib, xb := uploadU32(t, c, ids), zeros(t, c, k*len(ids))
	run(t, c, func(s *Seq) {
		s.Embed(quant.Q8_0, lo.All(), ib.All(), xb.All(), k, len(ids), 0, split, k)
		s.Embed(quant.Q8_0, hi.All(), ib.All(), xb.All(), k, len(ids), split, rows-split, k)
	})
	got := readF32(t, xb, k*len(ids))
	for tk, id := range ids {
		for i := 0; i < k; i++ {
			if got[tk*k+i] != wd[int(id)*k+i] {
				t.Fatalf("token %d (row %d) element %d: got %v, want %v", tk, id, i, got[tk*k+i], wd[int(id)*k+i])
			}
		}
	}
}

func TestRMSNormMatchesReference(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, true)
	rng := rand.New(rand.NewSource(1))
	const n, m = 300, 3
	const eps = 1e-5
	x, g := randVec(rng, n*m, 2), randVec(rng, n, 1)
	xb, gb, yb := upload(t, c, x), upload(t, c, g), zeros(t, c, n*m)
	run(t, c, func(s *Seq) { s.RMSNorm(xb.All(), gb.All(), yb.All(), n, m, n, eps) })
	got := readF32(t, yb, n*m)
	for tk := 0; tk < m; tk++ {
		var ss float64
		for i := 0; i < n; i++ {
			ss += float64(x[tk*n+i]) * float64(x[tk*n+i])
		}
		scale := 1 / math.Sqrt(ss/n+eps)
		for i := 0; i < n; i++ {
			want := float64(x[tk*n+i]) * scale * float64(g[i])
			if math.Abs(float64(got[tk*n+i])-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Fatalf("token %d element %d: got %v, want %v (rel tol 1e-5)", tk, i, got[tk*n+i], want)
			}
		}
	}
}

// RMSNorm and SwiGLU round exactly as llama.cpp's CPU path does (its formulas written out in
// Go below): their outputs are the next quantized product's inputs, where one last-bit
// difference can flip an 8-bit rounding. Exact on every device: where the implementation's
// division and square root are approximate (NVIDIA's), exact.glsl's divExact and sqrtExact
// correct them.
func TestRMSNormAndSwiGLURoundLikeLlamaCPU(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, true)
	rng := rand.New(rand.NewSource(5))
	const m = 16
	g := randVec(rng, 4096, 1)
	gb := upload(t, c, g)
	for _, n := range []int{64, 100, 256, 704, 4096} {
		t.Run(fmt.Sprintf("rmsnorm/%d", n), func(t *testing.T) {
			x := randVec(rng, n*m, 3)
			x[7] = 1e-20 // a square below float32's smallest normal
			xb, yb := upload(t, c, x), zeros(t, c, n*m)
			const eps = 1e-5
			run(t, c, func(s *Seq) { s.RMSNorm(xb.All(), gb.All(), yb.All(), n, m, n, eps) })
			got := readF32(t, yb, n*m)
			for tk := 0; tk < m; tk++ {
				row := x[tk*n : (tk+1)*n]
				var sum float64
				for _, v := range row {
					sum += float64(v * v)
				}
				mean := float32(sum / float64(n))
				scale := 1 / float32(math.Sqrt(float64(mean+eps)))
				for i, v := range row {
					if want := v * scale * g[i]; got[tk*n+i] != want {
						t.Fatalf("token %d element %d: got %v, want exactly %v", tk, i, got[tk*n+i], want)
					}
				}
			}
		})
	}
	for _, scale := range []float64{0.3, 3, 30} {
		t.Run(fmt.Sprintf("swiglu/scale%g", scale), func(t *testing.T) {
			const n = 1 << 14
			a, u := randVec(rng, n, scale), randVec(rng, n, 1)
			a[0], a[1], a[2] = 0, 95, -95 // exp(-a) of 1, underflowing, overflowing
			ab, ub, yb := upload(t, c, a), upload(t, c, u), zeros(t, c, n)
			run(t, c, func(s *Seq) { s.SwiGLU(ab.All(), ub.All(), yb.All(), n) })
			got := readF32(t, yb, n)
			for i, v := range a {
				want := v / (1 + float32(math.Exp(float64(-v)))) * u[i]
				if got[i] != want && !(math.IsNaN(float64(want)) && math.IsNaN(float64(got[i]))) {
					t.Fatalf("element %d (g %v): got %v, want exactly %v", i, v, got[i], want)
				}
			}
		})
	}
}

func ropeRef(x []float32, pos0, headDim, nHeads, m, ropeDim int, base, scale float64, neox bool, factors []float32) []float32 {
	out := append([]float32(nil), x...)
	half := ropeDim / 2
	for t := 0; t < m; t++ {
		for h := 0; h < nHeads; h++ {
			for i := 0; i < half; i++ {
				theta := float64(pos0+t) * scale * math.Pow(base, -2*float64(i)/float64(ropeDim))
				if factors != nil {
					theta /= float64(factors[i])
				}
				c, s := math.Cos(theta), math.Sin(theta)
				b := t*nHeads*headDim + h*headDim
				a, bb := b+2*i, b+2*i+1
				if neox {
					a, bb = b+i, b+i+half
				}
				x0, x1 := float64(x[a]), float64(x[bb])
				out[a] = float32(x0*c - x1*s)
				out[bb] = float32(x0*s + x1*c)
			}
		}
	}
	return out
}

func TestRopeMatchesReferenceInBothPairings(t *testing.T) {
	c := ctxOrSkip(t)
	const headDim, nHeads, m = 64, 3, 4
	for _, tc := range []struct {
		name    string
		neox    bool
		ropeDim int
		pos0    int
		factors bool
	}{
		{"normal", false, 64, 7, false},
		{"neox", true, 64, 1000, false},
		{"neox partial rotary", true, 32, 5, false},
		{"normal with frequency factors", false, 64, 300, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(tc.pos0)))
			x := randVec(rng, headDim*nHeads*m, 1)
			xb := upload(t, c, x)
			var factors []float32
			if tc.factors {
				factors = make([]float32, tc.ropeDim/2)
				for i := range factors {
					factors[i] = 1 + float32(i%5)
				}
			}
			cs := make([]float32, m*tc.ropeDim)
			RopeAngles(cs, tc.pos0, m, tc.ropeDim, 10000, 1, factors)
			csb := upload(t, c, cs)
			run(t, c, func(s *Seq) {
				s.Rope(xb.All(), csb.All(), headDim, nHeads, m, tc.ropeDim, tc.neox, headDim*nHeads)
			})
			got := readF32(t, xb, len(x))
			want := ropeRef(x, tc.pos0, headDim, nHeads, m, tc.ropeDim, 10000, 1, tc.neox, factors)
			// float32 angles at positions near 1000 carry ~1e-4 rad of rounding.
			for i := range want {
				if math.Abs(float64(got[i]-want[i])) > 5e-4 {
					t.Fatalf("element %d: got %v, want %v (abs tol 5e-4)", i, got[i], want[i])
				}
			}
			// With the table's angles, each rotated value is llama.cpp's to the bit: both
			// products rounded, then the difference or sum (no fused multiply-add).
			half := tc.ropeDim / 2
			for tok := 0; tok < m; tok++ {
				for h := 0; h < nHeads; h++ {
					base := tok*headDim*nHeads + h*headDim
					for i := 0; i < half; i++ {
						co, si := cs[2*(tok*half+i)], cs[2*(tok*half+i)+1]
						a, b := base+2*i, base+2*i+1
						if tc.neox {
							a, b = base+i, base+i+half
						}
						wa := float32(x[a]*co) - float32(x[b]*si)
						wb := float32(x[a]*si) + float32(x[b]*co)
						if got[a] != wa || got[b] != wb {
							t.Fatalf("token %d head %d pair %d: got (%v, %v), want exactly (%v, %v)", tok, h, i, got[a], got[b], wa, wb)
						}
					}
				}
			}
		})
	}
}

func f16Round(v []float32) []float32 {
	q, err := quant.Quantize(quant.F16, v)
	if err != nil {
		panic(err)
	}
	out := make([]float32, len(v))
	if err := quant.Dequantize(quant.F16, q, out); err != nil {
		panic(err)
	}
	return out
}

func attentionRef(q, kc, vc []float32, pos0, headDim, nHead, nKV, m int, scale float64) []float32 {
	out := make([]float32, m*nHead*headDim)
	row := nKV * headDim
	for t := 0; t < m; t++ {
		last := pos0 + t
		for h := 0; h < nHead; h++ {
			kvh := h / (nHead / nKV)
			sc := make([]float64, last+1)
			mx := math.Inf(-1)
			for j := 0; j <= last; j++ {
				var d float64
				for i := 0; i < headDim; i++ {
					d += float64(q[t*nHead*headDim+h*headDim+i]) * float64(kc[j*row+kvh*headDim+i])
				}
				sc[j] = d * scale
				mx = math.Max(mx, sc[j])
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for i := 0; i < headDim; i++ {
				var acc float64
				for j := 0; j <= last; j++ {
					acc += sc[j] * float64(vc[j*row+kvh*headDim+i])
				}
				out[t*nHead*headDim+h*headDim+i] = float32(acc / sum)
			}
		}
	}
	return out
}

// Prefill writes 67 positions (more than one 64-key chunk) and attends causally; decode then
// adds position 67 and attends over all 68. GQA: 4 query heads over 2 KV heads.
func TestAttentionPrefillAndDecodeMatchReference(t *testing.T) {
	c := ctxOrSkip(t)
	const headDim, nHead, nKV, prefill, ctx = 64, 4, 2, 67, 96
	rng := rand.New(rand.NewSource(5))
	row := nKV * headDim
	scale := 1 / math.Sqrt(headDim)
	kAll, vAll := randVec(rng, (prefill+1)*row, 1), randVec(rng, (prefill+1)*row, 1)
	kCache, err := c.NewBuffer(uint64(ctx*row*2), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kCache.Free)
	vCache, err := c.NewBuffer(uint64(ctx*row*2), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vCache.Free)
	kf, vf := f16Round(kAll), f16Round(vAll)
	for _, step := range []struct {
		name string
		pos0 int
		m    int
	}{{"prefill", 0, prefill}, {"decode", prefill, 1}} {
		t.Run(step.name, func(t *testing.T) {
			q := randVec(rng, step.m*nHead*headDim, 1)
			kb := upload(t, c, kAll[step.pos0*row:(step.pos0+step.m)*row])
			vb := upload(t, c, vAll[step.pos0*row:(step.pos0+step.m)*row])
			qb, ob, pb := upload(t, c, q), zeros(t, c, step.m*nHead*headDim), uploadU32(t, c, []uint32{uint32(step.pos0)})
			run(t, c, func(s *Seq) {
				s.KVStore(kb.All(), kCache.All(), pb.All(), row, step.m, row)
				s.KVStore(vb.All(), vCache.All(), pb.All(), row, step.m, row)
				s.Barrier()
				s.Attention(qb.All(), kCache.All(), vCache.All(), ob.All(), pb.All(), headDim, nHead, nKV, step.m, nHead*headDim, nHead*headDim, float32(scale))
			})
			got := readF32(t, ob, step.m*nHead*headDim)
			// The kernel multiplies the f16 cache with f16-rounded queries, as llama.cpp does.
			want := attentionRef(f16Round(q), kf, vf, step.pos0, headDim, nHead, nKV, step.m, scale)
			// The kernel keeps the weighted value sum in f16 (rounded after every position, as
			// llama.cpp's CPU path does): each element may be off by ~√positions f16 roundings,
			// and the mean error must stay at f16 precision.
			var sum float64
			for i := range want {
				e := math.Abs(float64(got[i]-want[i])) / math.Max(1, math.Abs(float64(want[i])))
				sum += e
				if e > 5e-3 {
					t.Fatalf("output %d: got %v, want %v (rel tol 5e-3)", i, got[i], want[i])
				}
			}
			if mean := sum / float64(len(want)); mean > 5e-4 {
				t.Fatalf("mean relative error %.2g, want under 5e-4", mean)
			}
		})
	}
}

func TestSwiGLUAddAndArgmaxMatchReference(t *testing.T) {
	c := ctxOrSkip(t)
	rng := rand.New(rand.NewSource(9))
	const n = 1000
	g, u, a := randVec(rng, n, 3), randVec(rng, n, 1), randVec(rng, n, 1)
	logits := randVec(rng, n, 1)
	logits[617] = 9
	logits[811] = 9 // a tie: the lower index wins
	gb, ub, yb, ab := upload(t, c, g), upload(t, c, u), zeros(t, c, n), upload(t, c, a)
	lb, ob := upload(t, c, logits), uploadU32(t, c, []uint32{0})
	run(t, c, func(s *Seq) {
		s.SwiGLU(gb.All(), ub.All(), yb.All(), n)
		s.Barrier()
		s.Add(ab.All(), yb.All(), n)
		s.Argmax(lb.All(), ob.All(), n)
	})
	got := readF32(t, yb, n)
	for i := 0; i < n; i++ {
		gg := float64(g[i])
		want := gg/(1+math.Exp(-gg))*float64(u[i]) + float64(a[i])
		if math.Abs(float64(got[i])-want) > 1e-5*math.Max(1, math.Abs(want)) {
			t.Fatalf("element %d: got %v, want %v (rel tol 1e-5)", i, got[i], want)
		}
	}
	idx, err := ob.ReadU32(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if idx[0] != 617 {
		t.Fatalf("argmax = %d, want 617", idx[0])
	}
}

// The device rounds activations exactly as quant.QuantizeActivation does for every weight
// type (values compared bit for bit after decoding both to float32), on rows with a stride
// wider than the row, with a tie for the largest magnitude (the first element wins).
func TestQuantizeActivationsMatchesQuantPackage(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, true)
	const k, m, stride = 512, 3, 512 + 32
	rng := rand.New(rand.NewSource(17))
	x := randVec(rng, stride*m, 2)
	x[5] = 0.1               // a block with a tiny spread
	x[10], x[20] = 3.5, -3.5 // equal magnitudes: the signed maximum is the first one
	x[stride+300], x[stride+301] = -3.25, 3.25
	for i := 2*stride + 64; i < 2*stride+96; i++ {
		x[i] = 0 // an all-zero 32-block
	}
	xb := upload(t, c, x)
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			yb := zeros(t, c, stride*m)
			var recorded bool
			run(t, c, func(s *Seq) { recorded = s.QuantizeActivations(typ, xb.All(), yb.All(), k, m, stride) })
			if typ == quant.F32 {
				if recorded {
					t.Fatal("F32 weights recorded an activation rounding")
				}
				return
			}
			got := readF32(t, yb, stride*m)
			at := quant.ActivationType(typ)
			for tok := 0; tok < m; tok++ {
				enc := quant.QuantizeActivation(typ, x[tok*stride:tok*stride+k], nil)
				want := make([]float32, k)
				if at == quant.F32 {
					copy(want, unsafeF32(enc))
				} else if err := quant.Dequantize(at, enc, want); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if g := got[tok*stride+i]; math.Float32bits(g) != math.Float32bits(want[i]) {
						t.Fatalf("token %d element %d (x %v): got %v, want exactly %v", tok, i, x[tok*stride+i], g, want[i])
					}
				}
			}
		})
	}
}

func unsafeF32(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return out
}

// argmax_wide (a decode step's greedy token over many workgroups) finds the first of the
// largest values as the one-workgroup argmax does: lengths from 1 to past 256 workgroups of
// 2048 (Qwen3's 151936 and Qwen3.5's 248320 vocabularies), each with its largest value
// planted twice, in two workgroups' ranges, and at the very end; three lengths in one command
// (the last workgroup resets the arrival count, read back as 0).
func TestArgmaxWideFindsTheFirstLargest(t *testing.T) {
	c := ctxOrSkip(t)
	rng := rand.New(rand.NewSource(11))
	cases := []int{1, 7, 256, 2047, 2048, 2049, 32000, 151936, 248320, 600001}
	for start := 0; start < len(cases); start += 3 {
		group := cases[start:min(start+3, len(cases))]
		arrivals := uploadU32(t, c, []uint32{0})
		type argRun struct {
			n                      int
			x                      []float32
			xb, out, outOld, parts *Buffer
			want                   int
		}
		runs := make([]argRun, len(group))
		for i, n := range group {
			x := randVec(rng, n, 1)
			want := 0
			if n > 1 {
				hi := float32(10)
				second := n - 1 // a tie after the first, in a later workgroup where there is one
				first := rng.Intn(n)
				if first == second {
					first = 0
				}
				if first > second {
					first, second = second, first
				}
				x[first], x[second] = hi, hi
				want = first
			}
			runs[i] = argRun{n: n, x: x, xb: upload(t, c, x), out: uploadU32(t, c, []uint32{0xdead}), outOld: uploadU32(t, c, []uint32{0xdead}),
				parts: upload(t, c, make([]float32, 2*argmaxMaxParts)), want: want}
		}
		run(t, c, func(s *Seq) {
			for _, r := range runs {
				s.ArgmaxWide(r.xb.All(), r.out.All(), r.parts.All(), arrivals.All(), r.n)
				s.Argmax(r.xb.All(), r.outOld.All(), r.n)
				s.Barrier()
			}
		})
		for _, r := range runs {
			got, err := r.out.ReadU32(0, 1)
			if err != nil {
				t.Fatal(err)
			}
			old, err := r.outOld.ReadU32(0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if int(got[0]) != r.want || old[0] != got[0] {
				t.Fatalf("%d values: argmax_wide %d, argmax %d, want %d", r.n, got[0], old[0], r.want)
			}
		}
		left, err := arrivals.ReadU32(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if left[0] != 0 {
			t.Fatalf("the arrival count is %d after the dispatches, want 0", left[0])
		}
	}
}

// A decode step's greedy token comes from argmax_wide (VKLLM_GPU_ARGMAX_WIDE) and equals the
// argmax of the logits it returns, and the one-workgroup argmax's token. Fails if not wired.
func TestGreedyDecodeTakesTheWideArgmax(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(on bool) { c.argmaxWide = on }(c.argmaxWide)
	defer func(on bool) { c.chain = on }(c.chain)
	c.chain = false // the logits read after each step are that step's only with no step queued behind it
	m := loadTiny(t, "", "llama", quant.Q8_0, 3)
	tokens := map[bool][]int{}
	for _, on := range []bool{false, true} {
		c.argmaxWide = on
		forgetKernels(c, "argmax_wide")
		r, err := NewResident(c, m, ResidentOptions{Context: 64})
		if err != nil {
			t.Fatal(err)
		}
		tok := 1
		for pos := 0; pos < 6; pos++ {
			next, err := r.Greedy(tok, pos)
			if err != nil {
				r.Close()
				t.Fatal(err)
			}
			lg, err := r.logits.ReadF32(0, m.Hyper.VocabSize)
			if err != nil {
				r.Close()
				t.Fatal(err)
			}
			if want := slices.Index(lg, slices.Max(lg)); next != want {
				r.Close()
				t.Fatalf("argmax_wide %v, position %d: greedy token %d, the logits' first largest is %d", on, pos, next, want)
			}
			tokens[on] = append(tokens[on], next)
			tok = next
		}
		r.Close()
		if _, made := c.kernels["argmax_wide"]; made != on {
			t.Fatalf("switch %v: made argmax_wide %v", on, made)
		}
	}
	if !slices.Equal(tokens[false], tokens[true]) {
		t.Fatalf("greedy tokens %v with argmax_wide, %v without", tokens[true], tokens[false])
	}
}

// With VKLLM_GPU_DEVICE_LOGITS a decode step's head writes its logits into device memory, the
// argmax reads them there and a copy brings them to the host-visible buffer: the same logits
// and greedy tokens as the head writing to the host, and the device buffer holding them.
// Fails if not wired.
func TestDecodeLogitsInDeviceMemory(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(on bool) { c.deviceLogits = on }(c.deviceLogits)
	defer func(on bool) { c.chain = on }(c.chain)
	c.chain = false // the logits read after each step are that step's only with no step queued behind it
	m := loadTiny(t, "", "llama", quant.Q8_0, 4)
	vocab := m.Hyper.VocabSize
	type result struct {
		tokens []int
		logits []float32
	}
	results := map[bool]result{}
	for _, on := range []bool{false, true} {
		c.deviceLogits = on
		r, err := NewResident(c, m, ResidentOptions{Context: 64})
		if err != nil {
			t.Fatal(err)
		}
		var res result
		tok := 3
		for pos := 0; pos < 5; pos++ {
			next, err := r.Greedy(tok, pos)
			if err != nil {
				r.Close()
				t.Fatal(err)
			}
			lg, err := r.logits.ReadF32(0, vocab)
			if err != nil {
				r.Close()
				t.Fatal(err)
			}
			if on {
				if r.logitsDev == nil {
					r.Close()
					t.Fatal("the switch is on but the runner holds no device logits")
				}
				dev, err := r.logitsDev.ReadF32(0, vocab)
				if err != nil {
					r.Close()
					t.Fatal(err)
				}
				if !slices.Equal(dev, lg) {
					r.Close()
					t.Fatalf("position %d: the device logits differ from the host's copy", pos)
				}
			}
			res.tokens = append(res.tokens, next)
			res.logits = append(res.logits, lg...)
			tok = next
		}
		r.Close()
		results[on] = res
	}
	if !slices.Equal(results[false].tokens, results[true].tokens) {
		t.Fatalf("greedy tokens %v with device logits, %v without", results[true].tokens, results[false].tokens)
	}
	for i := range results[false].logits {
		if math.Float32bits(results[false].logits[i]) != math.Float32bits(results[true].logits[i]) {
			t.Fatalf("logit %d: %v with device logits, %v without", i, results[true].logits[i], results[false].logits[i])
		}
	}
}
