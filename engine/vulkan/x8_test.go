package vulkan

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// roundX8 rounds x as quantize_x8 does: per 32-block d = f16(amax/127), q = roundEven(x·127/amax).
func roundX8(x []float32) (q []int8, d []float64) {
	q, d = make([]int8, len(x)), make([]float64, len(x)/32)
	for b := range d {
		amax := float32(0)
		for _, v := range x[32*b : 32*b+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		inv := float32(0)
		if amax > 0 {
			inv = 127 / amax
		}
		for i, v := range x[32*b : 32*b+32] {
			q[32*b+i] = int8(math.RoundToEven(float64(v * inv)))
		}
		d[b] = float64(quant.F16ToF32(quant.F32ToF16(amax / 127))) // quantize_x8 rounds d to f16
	}
	return q, d
}

// TestMatVecX8MatchesFloat64Reference holds every matvec_x8 kernel to a float64 product of the
// dequantized weights with x rounded as quantize_x8 rounds it: |y - ref| <= 1e-5·Σ|w·x| + 1e-6
// (integer sums are exact; the bound covers the f32 scaling and lane-order sums). Shapes take
// both the own-rows and the shared-rows grids and rows past a workgroup's end, and rows of
// 4096 give each lane of a 32-wide subgroup four units.
func TestMatVecX8MatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no matvec_x8", c.Info.Name)
	}
	rng := rand.New(rand.NewSource(8))
	for _, tc := range []struct {
		kernel string
		typ    quant.Type
		nr     int
		split  bool
	}{
		{"matvec_x8_q4_0", quant.Q4_0, 4, false},
		{"matvec_x8_q4_0r", quant.Q4_0, 4, true},
		{"matvec_x8_q4_0c", quant.Q4_0, 4, false},
		{"matvec_x8_q8_0", quant.Q8_0, 4, false},
		{"matvec_x8_q8_0r", quant.Q8_0, 4, true},
		{"matvec_x8_q8_0c", quant.Q8_0, 4, false},
		{"matvec_x8_q4_k", quant.Q4_K, 2, false},
		{"matvec_x8_q4_k4", quant.Q4_K, 4, false},
		{"matvec_x8_q5_k", quant.Q5_K, 2, false},
		{"matvec_x8_q6_k", quant.Q6_K, 2, false},
		{"matvec_x8_q6_kc", quant.Q6_K, 2, false},
		{"matvec_x8_q6_kw", quant.Q6_K, 2, false},
		{"matvec_x8_iq2_xxs", quant.IQ2_XXS, 4, false},
	} {
		for _, sh := range []struct{ k, n int }{{256, 37}, {512, 1030}, {1024, 5000}, {2080, 77}, {4096, 40}} {
			if sh.k%blockElems(tc.typ) != 0 || (tc.split && sh.k%256 != 0) {
				continue // 65 units of 32 (runs that end inside a subgroup) for the 32-blocks in GGUF's layout; the row-split rows start 16-byte aligned only at whole 256s
			}
			t.Run(fmt.Sprintf("%s/%dx%d", tc.kernel, sh.n, sh.k), func(t *testing.T) {
				wq, deq := moeTestWeights(t, rng, tc.typ, sh.k, sh.n, 1)
				var err error
				stored := wq
				if tc.split {
					if stored, err = splitRows(tc.typ, wq, sh.k); err != nil {
						t.Fatal(err)
					}
				}
				x := randVec(rng, sh.k, 2)
				xb, wb := upload(t, c, x), uploadBytes(t, c, stored)
				xq, xs := uploadBytes(t, c, make([]byte, x8QuantBytes(sh.k))), uploadBytes(t, c, make([]byte, x8ScaleBytes(sh.k)))
				yb := upload(t, c, make([]float32, sh.n))
				s, err := c.NewSeq()
				if err != nil {
					t.Fatal(err)
				}
				defer s.Free()
				s.QuantizeX8(xb.All(), xq.All(), xs.All(), sh.k, 1, X8Input{})
				s.Barrier()
				s.matVecX8(tc.kernel, tc.nr, wb.All(), xq.All(), xs.All(), yb.All(), sh.k, sh.n, false)
				if err := s.Run(); err != nil {
					t.Fatal(err)
				}
				got := readF32(t, yb, sh.n)
				q, d := roundX8(x)
				worst := 0.0
				for r := 0; r < sh.n; r++ {
					ref, mag := 0.0, 0.0
					for i := 0; i < sh.k; i++ {
						v := float64(deq[r*sh.k+i]) * float64(q[i]) * d[i/32]
						ref += v
						mag += math.Abs(v)
					}
					e := math.Abs(float64(got[r]) - ref)
					if e > 1e-5*mag+1e-6 {
						t.Fatalf("row %d: got %g, float64 reference %g (error %g, bound %g)", r, got[r], ref, e, 1e-5*mag+1e-6)
					}
					worst = max(worst, e/(mag+1e-30))
				}
				t.Logf("worst error relative to Σ|w·x|: %.2g", worst)
			})
		}
	}
}

// x8BenchKernels are the matvec_x8 kernels BenchmarkMatVecX8 times for each type: the one the
// decode step takes (x8Rows) and the measured candidates — row-split Q4_0/Q8_0 (16-byte
// weight loads; the GEMMs would have to read that layout too) and Q4_K at 4 rows a pass.
var x8BenchKernels = map[quant.Type][]struct {
	name string
	nr   int
}{
	quant.Q4_0:    {{"matvec_x8_q4_0", 4}, {"matvec_x8_q4_0r", 4}, {"matvec_x8_q4_0c", 4}},
	quant.Q8_0:    {{"matvec_x8_q8_0", 4}, {"matvec_x8_q8_0r", 4}, {"matvec_x8_q8_0c", 4}},
	quant.Q4_K:    {{"matvec_x8_q4_k", 2}, {"matvec_x8_q4_k4", 4}},
	quant.Q5_K:    {{"matvec_x8_q5_k", 2}},
	quant.Q6_K:    {{"matvec_x8_q6_k", 2}, {"matvec_x8_q6_kc", 2}, {"matvec_x8_q6_kw", 2}},
	quant.IQ2_XXS: {{"matvec_x8_iq2_xxs", 4}},
}

// splitRows returns Q4_0 or Q8_0 rows of k elements in the row-split order matvec_x8's
// ROW_SPLIT kernels read: each row's blocks' quants in block order, then their f16 scales.
func splitRows(t quant.Type, data []byte, k int) ([]byte, error) {
	var qb int
	switch t {
	case quant.Q4_0:
		qb = 16
	case quant.Q8_0:
		qb = 32
	default:
		return nil, fmt.Errorf("row-split layout: type %v has none (Q4_0 and Q8_0 do)", t)
	}
	rowBytes, err := t.RowBytes(k)
	if err != nil {
		return nil, fmt.Errorf("row-split layout: %w", err)
	}
	if len(data)%rowBytes != 0 {
		return nil, fmt.Errorf("row-split layout: %d bytes are not whole %d-byte rows", len(data), rowBytes)
	}
	nb, bb := k/32, qb+2
	out := make([]byte, len(data))
	for r := 0; r < len(data)/rowBytes; r++ {
		src, dst := data[r*rowBytes:(r+1)*rowBytes], out[r*rowBytes:(r+1)*rowBytes]
		for b := 0; b < nb; b++ {
			copy(dst[qb*b:qb*(b+1)], src[bb*b+2:bb*(b+1)])
			copy(dst[qb*nb+2*b:qb*nb+2*b+2], src[bb*b:bb*b+2])
		}
	}
	return out, nil
}

// benchX8Types limits BenchmarkMatVecX8 to some weight types (-x8types Q4_K,Q6_K; all by default).
var benchX8Types = flag.String("x8types", "", "BenchmarkMatVecX8: the weight types to time, comma-separated (Q4_K,Q6_K); all when empty")

// BenchmarkMatVecX8 times the int8 decode products against matvec_fast on an 8B model's
// shapes, rotating over enough distinct weights (at least 256 MB) that the GPU's L2 cache holds
// none of them between uses: GPU time from timestamps over 16 products per submit, reported as
// weight bytes per second. Run on a real GPU: -test.run '^$' -test.bench MatVecX8 -test.benchtime 3x.
func BenchmarkMatVecX8(b *testing.B) {
	c := ctxOrSkip(b)
	if c.Info.Type == "cpu" || !c.Info.Features[FeatureInt8Dot] {
		b.Skipf("%s: a CPU device or no int8 dot products: its timings say nothing here", c.Info.Name)
	}
	const reps = 16
	rng := rand.New(rand.NewSource(9))
	xb := benchBuffer(b, c, f32Bytes(randVec(rng, 14336, 1)))
	xq := benchBuffer(b, c, make([]byte, 4*16384))
	xq8 := benchBuffer(b, c, make([]byte, x8QuantBytes(14336)))
	xs8 := benchBuffer(b, c, make([]byte, x8ScaleBytes(14336)))
	yb := benchBuffer(b, c, make([]byte, 4*151936)) // the head's rows
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ2_XXS} {
		if *benchX8Types != "" && !slices.Contains(strings.Split(*benchX8Types, ","), typ.String()) {
			continue
		}
		for _, sh := range []struct {
			name string
			n, k int
		}{{"gate", 14336, 4096}, {"down", 4096, 14336}, {"attn_out", 4096, 4096}, {"head", 151936, 2048},
			{"q (30B-A3B)", 4096, 2048}, {"attn_out (30B-A3B)", 2048, 4096}} {
			if sh.name == "head" && typ != quant.Q6_K {
				continue // the K-quant mixes' head (Qwen3-30B-A3B's shape): Q6_K only
			}
			rowBytes, _ := typ.RowBytes(sh.k)
			size := rowBytes * sh.n
			copies := max(2, (256<<20)/size)
			ws := make([]*Buffer, copies)
			for i := range ws {
				wq := make([]byte, size)
				for j := 0; j < len(wq); j += 2 { // f16 scales stay finite: bytes below 0x40 in the high half
					wq[j], wq[j+1] = byte(rng.Intn(256)), byte(rng.Intn(0x3c))
				}
				ws[i] = benchBuffer(b, c, wq)
			}
			pick := func(i int) Binding { return ws[i%copies].All() }
			report := func(label string, ns float64) {
				us := ns / 1e3
				// printed, not logged: go keeps only the first lines of a benchmark's log
				fmt.Printf("%v %s %dx%d %s: %.1f us, %.0f GB/s\n", typ, sh.name, sh.n, sh.k, label, us, float64(size)/us/1e3)
			}
			report("matvec_fast", bestNsPerRep(b, c, reps, func(s *Seq) {
				for i := 0; i < reps; i++ {
					src := xb.All()
					if !c.roundsOwnActivations(typ, sh.k, 1) {
						s.QuantizeActivations(typ, xb.All(), xq.All(), sh.k, 1, sh.k)
						s.Barrier()
						src = xq.All()
					}
					s.MatMul(typ, pick(i), src, yb.All(), sh.k, sh.n, 1, sh.k, sh.n, false)
					s.Barrier()
				}
			})/reps)
			report("quantize_x8 alone", bestNsPerRep(b, c, reps, func(s *Seq) {
				for i := 0; i < reps; i++ {
					s.QuantizeX8(xb.All(), xq8.All(), xs8.All(), sh.k, 1, X8Input{})
					s.Barrier()
				}
			})/reps)
			// the GPU's clocks moved between passes of this benchmark on the H200 (the same
			// kernel 16 µs in one pass, 50 in the next): compare kernels within one pass
			kernels := x8BenchKernels[typ]
			for _, kn := range kernels {
				for _, share := range []int{defaultMatvecShareBelow, 0} {
					prev := c.matvecShareBelow
					c.matvecShareBelow = share
					ns := bestNsPerRep(b, c, reps, func(s *Seq) {
						for i := 0; i < reps; i++ {
							s.QuantizeX8(xb.All(), xq8.All(), xs8.All(), sh.k, 1, X8Input{})
							s.Barrier()
							s.matVecX8(kn.name, kn.nr, pick(i), xq8.All(), xs8.All(), yb.All(), sh.k, sh.n, false)
							s.Barrier()
						}
					}) / reps
					c.matvecShareBelow = prev
					report(fmt.Sprintf("%s (+quantize, share below %d)", kn.name, share), ns)
				}
			}
		}
	}
}

// TestQuantizeX8RoundsEachInputWithinHalfAStep holds quantize_x8's three inputs (x, RMSNorm(x)·g,
// silu(x)·u) to a float64 computation of the same values, row by row over three rows: each
// block's d within an f16 step of amax/127, every q·d within half a step (plus |q| times d's
// f16 rounding, and 1e-5 relative for the f32 arithmetic before the rounding) of the float64
// value, and the stored sum equal to Σq. Lengths take one and several 256-thread passes and a
// partial group of 32 blocks.
func TestQuantizeX8RoundsEachInputWithinHalfAStep(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no subgroup arithmetic, so no quantize_x8", c.Info.Name)
	}
	rng := rand.New(rand.NewSource(10))
	const rows = 3
	for _, k := range []int{64, 1056, 4096, 14336} {
		for _, mode := range []string{"plain", "norm", "swiglu"} {
			t.Run(fmt.Sprintf("%s/%d", mode, k), func(t *testing.T) {
				x, g, u := randVec(rng, rows*k, 3), randVec(rng, k, 1), randVec(rng, rows*k, 1)
				ref := make([]float64, rows*k)
				for r := 0; r < rows; r++ {
					ss := 0.0
					for _, v := range x[r*k : (r+1)*k] {
						ss += float64(v) * float64(v)
					}
					for i := r * k; i < (r+1)*k; i++ {
						switch mode {
						case "plain":
							ref[i] = float64(x[i])
						case "norm":
							ref[i] = float64(x[i]) * float64(g[i-r*k]) / math.Sqrt(ss/float64(k)+1e-5)
						case "swiglu":
							a := float64(x[i])
							ref[i] = a / (1 + math.Exp(-a)) * float64(u[i])
						}
					}
				}
				xb, gb, ub := upload(t, c, x), upload(t, c, g), upload(t, c, u)
				xq, xs := uploadBytes(t, c, make([]byte, rows*x8QuantBytes(k))), upload(t, c, make([]float32, rows*2*(k/32)))
				in := X8Input{}
				switch mode {
				case "norm":
					gg := gb.All()
					in = X8Input{Norm: &gg, Eps: 1e-5}
				case "swiglu":
					uu := ub.All()
					in = X8Input{Up: &uu}
				}
				s, err := c.NewSeq()
				if err != nil {
					t.Fatal(err)
				}
				defer s.Free()
				s.QuantizeX8(xb.All(), xq.All(), xs.All(), k, rows, in)
				if err := s.Run(); err != nil {
					t.Fatal(err)
				}
				all, err := xq.Read(0, uint64(rows*x8QuantBytes(k)))
				if err != nil {
					t.Fatal(err)
				}
				scAll := readF32(t, xs, rows*2*(k/32))
				for r := 0; r < rows; r++ {
					qb, sc, rref := all[r*x8QuantBytes(k):], scAll[r*2*(k/32):], ref[r*k:(r+1)*k]
					for b := 0; b < k/32; b++ {
						amax := 0.0
						for _, v := range rref[32*b : 32*b+32] {
							amax = max(amax, math.Abs(v))
						}
						d := float64(sc[2*b])
						if math.Abs(d-amax/127) > amax/127*2e-3+1e-30 {
							t.Fatalf("row %d block %d: d %g, float64 amax/127 %g", r, b, d, amax/127)
						}
						sum := 0
						for i := 0; i < 32; i++ {
							h, w := i/16, (i%16)/4
							word := ((b/32)*2+h)*32 + b%32
							q := int(int8(qb[16*word+4*w+i%4]))
							sum += q
							// half the true step, plus what d's f16 rounding moves q·d
							bound := 0.5*amax/127*(1+1e-5) + math.Abs(float64(q))*math.Abs(d-amax/127) + 1e-5*math.Abs(rref[32*b+i])
							if e := math.Abs(float64(q)*d - rref[32*b+i]); e > bound {
								t.Fatalf("row %d block %d element %d: q %d · d %g = %g, float64 value %g", r, b, i, q, d, float64(q)*d, rref[32*b+i])
							}
						}
						if float64(sum) != float64(sc[2*b+1]) {
							t.Fatalf("row %d block %d: stored sum %g, Σq %d", r, b, sc[2*b+1], sum)
						}
					}
				}
			})
		}
	}
}

// The decode step's int8 expert products (moe_matvec_x8) against a float64 reference on the
// dequantized weights and x rounded as quantize_x8 rounds it, bound 1e-5·Σ|w·x| + 1e-6, for
// every type with a kernel: 5 experts of 7 rows (a subgroup's rows partial) serve 3 tokens × 2
// slots (expert 2 never chosen), the tensor bound as two bindings, each dispatch skipping the
// other's pairs. Both input forms (the token's row, each pair's own row) and the paired form
// (gate and up experts in one binding, 256 bytes aligned, SwiGLU of the two sums against
// silu(g)·u in float64, bound 1e-5 relative to |g|+|u| magnitudes) are checked, Y poisoned
// first so a row left unwritten shows.
func TestMoEMatVecX8MatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no moe_matvec_x8", c.Info.Name)
	}
	const n, ne, used, m = 7, 5, 2, 3
	ids := []uint32{4, 1, 1, 3, 0, 4}
	pairs := m * used
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ2_XXS} {
		k := 64
		if typ.BlockSize() > 32 {
			k = 512
		}
		for _, form := range []string{"token-input", "pair-input", "gate-up-swiglu"} {
			t.Run(fmt.Sprintf("%v/%s", typ, form), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(typ)*11 + int64(len(form))))
				gq, gd := moeTestWeights(t, rng, typ, k, n, ne)
				uq, ud := moeTestWeights(t, rng, typ, k, n, ne)
				perPair := form == "pair-input"
				xRows := m
				if perPair {
					xRows = pairs
				}
				x := randVec(rng, xRows*k, 1)
				xb, ib := upload(t, c, x), uploadU32(t, c, ids)
				xq, xs := uploadBytes(t, c, make([]byte, xRows*x8QuantBytes(k))), uploadBytes(t, c, make([]byte, xRows*x8ScaleBytes(k)))
				yb := upload(t, c, poisoned(pairs*n))
				per := len(gq) / ne
				if form == "gate-up-swiglu" {
					off := (len(gq) + 255) / 256 * 256
					both := make([]byte, off+len(uq))
					copy(both, gq)
					copy(both[off:], uq)
					wb := uploadBytes(t, c, both)
					run(t, c, func(s *Seq) {
						s.QuantizeX8(xb.All(), xq.All(), xs.All(), k, xRows, X8Input{})
						s.Barrier()
						s.MoEMatVecX8(typ, wb.All(), xq.All(), xs.All(), yb.All(), ib.All(), uint64(off), k, n, 0, ne, used, pairs, false, n)
					})
				} else {
					w0, w1 := uploadBytes(t, c, gq[:3*per]), uploadBytes(t, c, gq[3*per:])
					run(t, c, func(s *Seq) {
						s.QuantizeX8(xb.All(), xq.All(), xs.All(), k, xRows, X8Input{})
						s.Barrier()
						s.MoEMatVecX8(typ, w0.All(), xq.All(), xs.All(), yb.All(), ib.All(), 0, k, n, 0, 3, used, pairs, perPair, n)
						s.MoEMatVecX8(typ, w1.All(), xq.All(), xs.All(), yb.All(), ib.All(), 0, k, n, 3, 2, used, pairs, perPair, n)
					})
				}
				got := readF32(t, yb, pairs*n)
				dot := func(wd []float32, e, r int, q []int8, d []float64) (float64, float64) {
					var ref, mag float64
					for i := 0; i < k; i++ {
						p := float64(wd[(e*n+r)*k+i]) * float64(q[i]) * d[i/32]
						ref += p
						mag += math.Abs(p)
					}
					return ref, mag
				}
				for q := 0; q < pairs; q++ {
					e, xr := int(ids[q]), pairRow(q, used, perPair)
					xq8, xd := roundX8(x[xr*k : (xr+1)*k])
					for r := 0; r < n; r++ {
						ref, mag := dot(gd, e, r, xq8, xd)
						tol := 1e-5*mag + 1e-6
						if form == "gate-up-swiglu" {
							u, umag := dot(ud, e, r, xq8, xd)
							sg := ref / (1 + math.Exp(-ref))
							tol = 1e-5*(mag*math.Abs(u)+umag*math.Abs(sg)) + 1e-5*math.Abs(sg*u) + 1e-6
							ref = sg * u
						}
						if d := math.Abs(float64(got[q*n+r]) - ref); !(d <= tol) {
							t.Fatalf("pair %d (expert %d) row %d: got %v, want %v, tol %g", q, e, r, got[q*n+r], ref, tol)
						}
					}
				}
			})
		}
	}
}

// TestMoEDownX8MatchesFloat64Reference holds moe_down_x8 (a decode step's expert down
// products with the combine folded in) to a float64 reference over the pairs' hidden rows
// rounded as quantize_x8 rounds them: x[r] + Σ_j w_j·(W_{e_j}[r]·h_j) (+ sigmoid(g)·sh[r]),
// |got - ref| <= 1e-5·(Σ_j |w_j|·Σ|W·h| + |sh·sigmoid(g)| + |x|) + 1e-6. Rows past a
// workgroup's end, a repeated expert and the shared expert are all taken.
func TestMoEDownX8MatchesFloat64Reference(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no moe_down_x8", c.Info.Name)
	}
	const n, ne = 37, 5
	ids := []uint32{4, 1, 1, 0}
	used := len(ids)
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ2_XXS} {
		k := 96
		if typ.BlockSize() > 32 {
			k = 768
		}
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/shared=%v", typ, shared), func(t *testing.T) {
				rng := rand.New(rand.NewSource(int64(typ)*13 + int64(len(ids))))
				wq, wd := moeTestWeights(t, rng, typ, k, n, ne)
				h := randVec(rng, used*k, 1)
				wts := randVec(rng, used, 1)
				x, sh, g := randVec(rng, n, 1), randVec(rng, n, 1), randVec(rng, 1, 2)
				hb, ib, wb, xb := upload(t, c, h), uploadU32(t, c, ids), upload(t, c, wts), upload(t, c, x)
				shb, gb, wqb := upload(t, c, sh), upload(t, c, g), uploadBytes(t, c, wq)
				xq, xs := uploadBytes(t, c, make([]byte, used*x8QuantBytes(k))), uploadBytes(t, c, make([]byte, used*x8ScaleBytes(k)))
				run(t, c, func(s *Seq) {
					s.QuantizeX8(hb.All(), xq.All(), xs.All(), k, used, X8Input{})
					s.Barrier()
					s.MoEDownX8(typ, wqb.All(), xq.All(), xs.All(), xb.All(), ib.All(), wb.All(), shb.All(), gb.All(), k, n, used, shared)
				})
				got := readF32(t, xb, n)
				sg := 1 / (1 + math.Exp(-float64(g[0])))
				for r := 0; r < n; r++ {
					ref, mag := float64(x[r]), math.Abs(float64(x[r]))
					for j, e := range ids {
						q, d := roundX8(h[j*k : (j+1)*k])
						var dot, dmag float64
						for i := 0; i < k; i++ {
							p := float64(wd[(int(e)*n+r)*k+i]) * float64(q[i]) * d[i/32]
							dot += p
							dmag += math.Abs(p)
						}
						ref += float64(wts[j]) * dot
						mag += math.Abs(float64(wts[j])) * dmag
					}
					if shared {
						ref += float64(sh[r]) * sg
						mag += math.Abs(float64(sh[r]) * sg)
					}
					if diff := math.Abs(float64(got[r]) - ref); !(diff <= 1e-5*mag+1e-6) {
						t.Fatalf("row %d: got %v, want %v (|Δ| %g, bound %g)", r, got[r], ref, diff, 1e-5*mag+1e-6)
					}
				}
			})
		}
	}
}

// The roster's numeric-tier and int8 lines say which decode products serve: the int8 ones on a
// fast-tier device with int8 dot products, the f32 ones with VKLLM_GPU_X8=0 (and the tier
// selection turns the int8 products off with it); the absent-capability warning carries its
// measured cost.
func TestNumericTierLineNamesTheDecodeProducts(t *testing.T) {
	c := ctxOrSkip(t)
	if c.exact || !c.Info.Features[FeatureInt8Dot] || c.Info.SubgroupSize < 8 {
		t.Skipf("%s: exact tier or no int8 dot products, so no int8 decode products to name", c.Info.Name)
	}
	t.Cleanup(c.selectNumericTier) // the environment's choice back, after Setenv's own cleanups (LIFO)
	if !strings.Contains(int8AbsentCost, "H200") || !strings.Contains(int8AbsentCost, "t/s") {
		t.Errorf("the absent-int8 warning carries no measured cost: %q", int8AbsentCost)
	}
	for _, tc := range []struct {
		env, want string
		x8        bool
	}{{"1", "int8 decode products", true}, {"0", "f32 decode products", false}} {
		t.Setenv("VKLLM_GPU_X8", tc.env)
		c.selectNumericTier()
		if c.x8 != tc.x8 || !strings.Contains(c.numericSelects(), tc.want) {
			t.Errorf("VKLLM_GPU_X8=%s: x8 %v, roster %q (want %v and %q)", tc.env, c.x8, c.numericSelects(), tc.x8, tc.want)
		}
		if int8Line := c.int8Selects(); strings.Contains(int8Line, "VKLLM_GPU_X8=0") == tc.x8 {
			t.Errorf("VKLLM_GPU_X8=%s: the int8 dot product line says %q", tc.env, int8Line)
		}
	}
}

// With Q8K, quantize_x8 rounds as llama.cpp's Q8_K does, bit for bit: every 256-block's d (f32)
// and int8 values equal engine/quant's QuantizeActivation for a K-quant weight (which
// implements llama.cpp's quantize_row_q8_K), and each 32-block carries that d with its own
// Σq. Rows of one and several passes, random values with repeated magnitudes of both signs (the
// first of equal magnitudes sets the sign), and an all-zero block.
func TestQuantizeX8Q8KEqualsTheCPUsQ8K(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no subgroup arithmetic, so no quantize_x8", c.Info.Name)
	}
	rng := rand.New(rand.NewSource(11))
	for _, k := range []int{256, 1024, 4352} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			const rows = 2
			x := randVec(rng, rows*k, 2)
			x[5], x[77] = -6.5, 6.5 // equal magnitudes: the first (negative) sets iscale's sign
			for i := 256; i < 512 && i < len(x); i++ {
				x[i] = 0
			}
			xb := upload(t, c, x)
			xq, xs := uploadBytes(t, c, make([]byte, rows*x8QuantBytes(k))), upload(t, c, make([]float32, rows*2*(k/32)))
			run(t, c, func(s *Seq) { s.QuantizeX8(xb.All(), xq.All(), xs.All(), k, rows, X8Input{Q8K: true}) })
			all, err := xq.Read(0, uint64(rows*x8QuantBytes(k)))
			if err != nil {
				t.Fatal(err)
			}
			sc := readF32(t, xs, rows*2*(k/32))
			for r := 0; r < rows; r++ {
				want := quant.QuantizeActivation(quant.Q4_K, x[r*k:(r+1)*k], nil) // Q8_K blocks: d f32, 256 int8, 16 int16
				qb, srow := all[r*x8QuantBytes(k):], sc[r*2*(k/32):]
				for b := 0; b < k/32; b++ {
					sb := want[(b/8)*292:]
					d := math.Float32frombits(uint32(sb[0]) | uint32(sb[1])<<8 | uint32(sb[2])<<16 | uint32(sb[3])<<24)
					if srow[2*b] != d {
						t.Fatalf("row %d block %d: d %g, the CPU's Q8_K d %g", r, b, srow[2*b], d)
					}
					sum := 0
					for i := 0; i < 32; i++ {
						word := ((b/32)*2+i/16)*32 + b%32
						got := int8(qb[16*word+4*((i%16)/4)+i%4])
						if wantQ := int8(sb[4+32*(b%8)+i]); got != wantQ {
							t.Fatalf("row %d block %d element %d: q %d, the CPU's %d", r, b, i, got, wantQ)
						}
						sum += int(got)
					}
					if float64(sum) != float64(srow[2*b+1]) {
						t.Fatalf("row %d block %d: stored sum %g, Σq %d", r, b, srow[2*b+1], sum)
					}
				}
			}
		})
	}
}

// quantize_x8 with X8Input.Merge rounds what attention_merge makes from attention_split's
// partials: its int8 blocks and scales equal those of quantize_x8 over attention_merge's output,
// bit for bit, for head sizes 64 and 128, short and long contexts (one and many ranges), in
// both roundings; head size 80 has a head straddle two workgroups' passes, and head size 8
// (128 heads a pass) takes the path without shared weights. Gated (X8Input.Gate with Merge:
// the hybrids' decode step) it equals attention_merge, attn_gate, then quantize_x8.
func TestQuantizeX8MergeEqualsMergeThenRound(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no subgroup arithmetic, so no quantize_x8", c.Info.Name)
	}
	rng := rand.New(rand.NewSource(12))
	for _, tc := range []struct{ headDim, nHead, nKV, ctx int }{{64, 8, 2, 20}, {128, 8, 4, 300}, {128, 4, 4, 1200}, {80, 16, 4, 300}, {8, 160, 32, 100}} {
		for _, v := range []struct{ q8k, gated bool }{{false, false}, {true, false}, {false, true}} {
			q8k := v.q8k
			t.Run(fmt.Sprintf("head%d/heads%d/ctx%d/q8k=%v/gated=%v", tc.headDim, tc.nHead, tc.ctx, q8k, v.gated), func(t *testing.T) {
				qd, kd := tc.nHead*tc.headDim, tc.nKV*tc.headDim
				if q8k && qd%256 != 0 {
					t.Skip("not whole Q8_K blocks")
				}
				q := upload(t, c, randVec(rng, qd, 1))
				kw, vw := make([]uint32, tc.ctx*kd/2), make([]uint32, tc.ctx*kd/2)
				for i := range kw {
					kw[i] = packF16Pair(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
					vw[i] = packF16Pair(float32(rng.NormFloat64()), float32(rng.NormFloat64()))
				}
				kc, vc := uploadU32(t, c, kw), uploadU32(t, c, vw)
				pos := uploadU32(t, c, []uint32{uint32(tc.ctx - 1)})
				part := upload(t, c, make([]float32, c.attentionPartialFloats(1, tc.nHead, tc.nKV, tc.headDim, tc.ctx)))
				o := upload(t, c, make([]float32, qd))
				xq1, xs1 := uploadBytes(t, c, make([]byte, x8QuantBytes(qd))), uploadBytes(t, c, make([]byte, x8ScaleBytes(qd)))
				xq2, xs2 := uploadBytes(t, c, make([]byte, x8QuantBytes(qd))), uploadBytes(t, c, make([]byte, x8ScaleBytes(qd)))
				scale := float32(1 / math.Sqrt(float64(tc.headDim)))
				var splits int
				// gated: the hybrids' attention, its output gated by sigmoid of the gates that
				// follow each head's query in the projection qg (attn_gate, then the rounding)
				qg := upload(t, c, randVec(rng, 2*qd, 2))
				var gate *Binding
				if v.gated {
					g := qg.All()
					gate = &g
				}
				run(t, c, func(s *Seq) {
					s.AttentionSplit(q.All(), kc.All(), vc.All(), o.All(), pos.All(), part.All(), tc.headDim, tc.nHead, tc.nKV, 1, qd, qd, tc.ctx, scale)
					s.Barrier()
					if v.gated {
						s.AttnGate(qg.All(), o.All(), tc.headDim, qd)
						s.Barrier()
					}
					s.QuantizeX8(o.All(), xq1.All(), xs1.All(), qd, 1, X8Input{Q8K: q8k})
					s.Barrier()
					splits = s.AttentionSplitRanges(q.All(), kc.All(), vc.All(), pos.All(), part.All(), tc.headDim, tc.nHead, tc.nKV, 1, qd, tc.ctx, scale)
					s.Barrier()
					s.QuantizeX8(part.All(), xq2.All(), xs2.All(), qd, 1, X8Input{Q8K: q8k, Merge: true, Gate: gate, HeadDim: tc.headDim, Heads: tc.nHead, Splits: splits})
				})
				var a1, a2, s1, s2 []byte
				for _, r := range []struct {
					b   *Buffer
					n   int
					out *[]byte
				}{{xq1, x8QuantBytes(qd), &a1}, {xq2, x8QuantBytes(qd), &a2}, {xs1, x8ScaleBytes(qd), &s1}, {xs2, x8ScaleBytes(qd), &s2}} {
					v, err := r.b.Read(0, uint64(r.n))
					if err != nil {
						t.Fatal(err)
					}
					*r.out = v
				}
				if !bytes.Equal(a1, a2) || !bytes.Equal(s1, s2) {
					t.Fatalf("%d ranges: the merged rounding differs from merge then round", splits)
				}
				t.Logf("%d ranges", splits)
			})
		}
	}
}

// Every matvec_x8_<type>_conv against matvec_x8 followed by ssm_conv, over two decode steps
// (the second reads the state the first moved on): outputs and state bit for bit the same (the
// product's sums and ssm_conv's arithmetic are the same code), on the own-rows and shared-rows
// grids (37 and 1030 channels). Negative control: the state after the steps differs from the
// state before them.
func TestMatVecX8ConvEqualsProductThenSSMConv(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no matvec_x8", c.Info.Name)
	}
	withTier(t, c, false)
	rng := rand.New(rand.NewSource(10))
	const k, taps = 256, 4
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ2_XXS} {
		for _, n := range []int{37, 1030} {
			t.Run(fmt.Sprintf("%v/%d", typ, n), func(t *testing.T) {
				forgetKernels(c, x8Kernel("matvec_x8_", typ)+"_conv")
				wq, _ := moeTestWeights(t, rng, typ, k, n, 1)
				wb, tapsB := uploadBytes(t, c, wq), upload(t, c, randVec(rng, n*taps, 0.5))
				state0 := randVec(rng, n*(taps-1), 1)
				stA, stB := upload(t, c, state0), upload(t, c, state0)
				yA, yB := upload(t, c, make([]float32, n)), upload(t, c, make([]float32, n))
				xq, xs := uploadBytes(t, c, make([]byte, x8QuantBytes(k))), uploadBytes(t, c, make([]byte, x8ScaleBytes(k)))
				for step := 0; step < 2; step++ {
					xb := upload(t, c, randVec(rng, k, 2))
					run(t, c, func(s *Seq) {
						s.QuantizeX8(xb.All(), xq.All(), xs.All(), k, 1, X8Input{Q8K: x8Q8K(typ)})
						s.Barrier()
						s.MatVecX8(typ, wb.All(), xq.All(), xs.All(), yA.All(), k, n, false)
						s.MatVecX8Conv(typ, wb.All(), xq.All(), xs.All(), yB.All(), tapsB.All(), stB.All(), k, n, taps)
						s.Barrier()
						s.SSMConv(yA.All(), tapsB.All(), stA.All(), n, 1, taps)
					})
					gotY, wantY := readF32(t, yB, n), readF32(t, yA, n)
					gotS, wantS := readF32(t, stB, n*(taps-1)), readF32(t, stA, n*(taps-1))
					for i := range wantY {
						if math.Float32bits(gotY[i]) != math.Float32bits(wantY[i]) {
							t.Fatalf("step %d channel %d: %v, the product then ssm_conv %v", step, i, gotY[i], wantY[i])
						}
					}
					for i := range wantS {
						if math.Float32bits(gotS[i]) != math.Float32bits(wantS[i]) {
							t.Fatalf("step %d state %d: %v, ssm_conv's %v", step, i, gotS[i], wantS[i])
						}
					}
				}
				if moved := readF32(t, stB, n*(taps-1)); slices.Equal(moved, state0) {
					t.Error("negative control: the state did not move")
				}
			})
		}
	}
}

// With VKLLM_GPU_X8_COOP a decode step's Q4_0, Q8_0 and Q6_K products copy their blocks through
// shared memory (matvec_x8_<type>c, their rope+kv and conv ends too): the logits
// of four decode steps equal the GGUF-layout reads' bit for bit (the same sums in the same
// order), on llama (the fused rope+kv ends) and qwen35 (the DeltaNet's conv end). Fails if the
// switch does not select the kernels.
func TestX8CoopDecodeEqualsGGUFLayoutReads(t *testing.T) {
	c := ctxOrSkip(t)
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no matvec_x8", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8, coop bool) { c.x8, c.x8Coop = x8, coop }(c.x8, c.x8Coop)
	c.x8 = true
	dir := t.TempDir()
	for _, tc := range []struct {
		arch    string
		typ     quant.Type
		kernels []string
	}{
		{"llama", quant.Q4_0, []string{"matvec_x8_q4_0c", "matvec_x8_q4_0c_rkv"}},
		{"llama", quant.Q8_0, []string{"matvec_x8_q8_0c", "matvec_x8_q8_0c_rkv"}},
		{"qwen35", quant.Q8_0, []string{"matvec_x8_q8_0c", "matvec_x8_q8_0c_conv"}},
		{"llama", quant.Q6_K, []string{"matvec_x8_q6_kc", "matvec_x8_q6_kc_rkv"}},
		{"qwen35", quant.Q6_K, []string{"matvec_x8_q6_kc", "matvec_x8_q6_kc_conv"}},
	} {
		t.Run(tc.arch+"-"+tc.typ.String(), func(t *testing.T) {
			m := loadTiny(t, dir, tc.arch, tc.typ, 3)
			decode := func(coop bool) []float32 {
				c.x8Coop = coop
				logits, _ := decodeSteps(t, c, m)
				return logits
			}
			forgetKernels(c, tc.kernels...)
			base := decode(false)
			for _, k := range tc.kernels {
				if _, made := c.kernels[k]; made {
					t.Fatalf("%s made with the switch off", k)
				}
			}
			coop := decode(true)
			for _, k := range tc.kernels {
				if _, made := c.kernels[k]; !made {
					t.Errorf("the decode steps did not take %s", k)
				}
			}
			if d := maxAbsDiff(base, coop); d != 0 {
				t.Errorf("logits differ by up to %g from the GGUF-layout reads'", d)
			}
		})
	}
}

// With VKLLM_GPU_Q6K_WIDE a decode step's Q6_K products take 64 elements a lane a step
// (matvec_x8_q6_kw, its rope+kv and conv ends too): their sums run in another order, so the
// logits of four decode steps stay within 1e-3 of the unit-a-lane kernels' (relative to the
// largest logit; TestMatVecX8MatchesFloat64Reference holds the kernel to a float64 bound) and
// pick the same tokens. Fails if the switch does not select the kernels.
func TestQ6KWideDecodeMatchesUnitReads(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(wide bool) { c.q6kWide = wide }(c.q6kWide)
	decodeVariantMatches(t, c, quant.Q6_K, []decodeVariantCase{
		{"llama", []string{"matvec_x8_q6_kw", "matvec_x8_q6_kw_rkv"}},
		{"qwen35", []string{"matvec_x8_q6_kw", "matvec_x8_q6_kw_conv"}},
	}, func(on bool) { c.q6kWide = on })
}

// decodeVariantCase is a tiny model's architecture and the kernels a decode variant must make
// for it.
type decodeVariantCase struct {
	arch    string
	kernels []string
}

// decodeVariantMatches runs four decode steps of each case's tiny model of type typ with a
// variant switched off, then on (set), on the fast tier's int8 products: with it off none of
// the case's kernels is made, with it on every one is, and the logits stay within 1e-3 of the
// switch-off run's (relative to the largest logit) and pick the same tokens.
func decodeVariantMatches(t *testing.T, c *Context, typ quant.Type, cases []decodeVariantCase, set func(on bool)) {
	t.Helper()
	if !c.Info.Features[FeatureInt8Dot] || !c.Info.Features[FeatureSubgroupArith] {
		t.Skipf("%s: no int8 dot products or subgroup arithmetic, so no matvec_x8", c.Info.Name)
	}
	withTier(t, c, false)
	defer func(x8, coop bool) { c.x8, c.x8Coop = x8, coop }(c.x8, c.x8Coop)
	c.x8, c.x8Coop = true, false
	dir := t.TempDir()
	for _, tc := range cases {
		t.Run(tc.arch, func(t *testing.T) {
			m := loadTiny(t, dir, tc.arch, typ, 3)
			decode := func(on bool) ([]float32, []int) {
				set(on)
				logits, _ := decodeSteps(t, c, m)
				vocab := len(logits) / 4
				var ids []int
				for i := range 4 {
					step := logits[i*vocab : (i+1)*vocab]
					ids = append(ids, slices.Index(step, slices.Max(step)))
				}
				return logits, ids
			}
			forgetKernels(c, tc.kernels...)
			base, baseIDs := decode(false)
			for _, k := range tc.kernels {
				if _, made := c.kernels[k]; made {
					t.Fatalf("%s made with the switch off", k)
				}
			}
			variant, variantIDs := decode(true)
			for _, k := range tc.kernels {
				if _, made := c.kernels[k]; !made {
					t.Errorf("the decode steps did not take %s", k)
				}
			}
			scale := 0.0
			for _, v := range base {
				scale = max(scale, math.Abs(float64(v)))
			}
			if d := float64(maxAbsDiff(base, variant)); d > 1e-3*scale {
				t.Errorf("logits differ by up to %g from the switch-off kernels' (bound %g)", d, 1e-3*scale)
			}
			if !slices.Equal(baseIDs, variantIDs) {
				t.Errorf("greedy tokens %v, the switch-off kernels' %v", variantIDs, baseIDs)
			}
		})
	}
}
