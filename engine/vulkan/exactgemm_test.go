package vulkan

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

func TestExactGEMMTakesQ4_0AndQ8_0PrefillOnly(t *testing.T) {
	c := &Context{gemm: gemmCoopmat, exact: true}
	for _, tc := range []struct {
		typ  quant.Type
		m    int
		want bool
	}{
		{quant.Q4_0, 2, true},
		{quant.Q8_0, 512, true},
		{quant.Q4_0, 1, false}, // decode keeps the matvec
		{quant.Q8_0, 1, false},
		{quant.Q4_K, 512, false},
		{quant.Q4_1, 512, false},
		{quant.F16, 512, false},
	} {
		if got := c.usesExactGEMM(tc.typ, tc.m); got != tc.want {
			t.Errorf("%v with %d tokens: exact tier %v, want %v", tc.typ, tc.m, got, tc.want)
		}
	}
	if (&Context{gemm: gemmCoopmat}).usesExactGEMM(quant.Q4_0, 512) {
		t.Error("the fast tier took the exact GEMM for Q4_0 prefill where the cooperative-matrix tier serves")
	}
	if !(&Context{gemm: gemmShared}).usesExactGEMM(quant.Q4_0, 512) {
		t.Error("without the cooperative-matrix tier the fast tier left Q4_0 prefill to the 8-token kernel (9-10x slower than the exact GEMM)")
	}
}

// The exact GEMM is bit-identical to llama.cpp's CPU order (llamaOrderQ4_0/Q8_0) over tile
// edges (rows not a multiple of 64 or 32, tokens not a multiple of 32), short and long rows,
// strides wider than the rows (elements past N in Y untouched), an all-zero activation block,
// a zero inside a block, and with and without accumulation into Y.
func TestExactGEMMIsBitIdenticalToLlamaOrder(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, true)
	for _, tc := range []struct {
		typ                  quant.Type
		k, n, m              int
		xStride, yStride     int // 0: k and n
		minusOneTwentyEights bool
	}{
		{typ: quant.Q4_0, k: 256, n: 45, m: 2},
		{typ: quant.Q4_0, k: 704, n: 130, m: 33, xStride: 704 + 96, yStride: 133},
		{typ: quant.Q4_0, k: 256, n: 64, m: 70},
		{typ: quant.Q4_0, k: 4096, n: 45, m: 11},
		{typ: quant.Q8_0, k: 256, n: 45, m: 2},
		{typ: quant.Q8_0, k: 704, n: 130, m: 33, xStride: 704 + 32, yStride: 131, minusOneTwentyEights: true},
		{typ: quant.Q8_0, k: 256, n: 64, m: 70},
		{typ: quant.Q8_0, k: 4096, n: 45, m: 11},
	} {
		xs, ys := tc.xStride, tc.yStride
		if xs == 0 {
			xs = tc.k
		}
		if ys == 0 {
			ys = tc.n
		}
		t.Run(fmt.Sprintf("%v/k%d/rows%d/tokens%d/xstride%d/ystride%d", tc.typ, tc.k, tc.n, tc.m, xs, ys), func(t *testing.T) {
			k, n, m := tc.k, tc.n, tc.m
			if !c.usesExactGEMM(tc.typ, m) {
				t.Fatalf("%v with %d tokens does not take the exact tier", tc.typ, m)
			}
			rng := rand.New(rand.NewSource(int64(k*n + m)))
			wq, err := quant.Quantize(tc.typ, randVec(rng, k*n, 0.5))
			if err != nil {
				t.Fatal(err)
			}
			if tc.minusOneTwentyEights { // -128 weights: valid Q8_0 bytes the quantizer never writes
				for b := 0; b+34 <= len(wq); b += 34 * 7 {
					wq[b+2+b%32] = 0x80
				}
			}
			x := randVec(rng, xs*m, 1.5)
			x[3] = 0 // a zero inside a block
			if m > 1 {
				for i := xs + 32; i < xs+64; i++ {
					x[i] = 0 // an all-zero block (scale 0) of token 1
				}
			}
			xr := make([]float32, len(x))
			enc := make([][]byte, m)
			for tok := 0; tok < m; tok++ {
				row := x[tok*xs : tok*xs+k]
				copy(xr[tok*xs:], roundedQ8_0(t, row, k))
				enc[tok] = quant.QuantizeActivation(tc.typ, row, nil)
			}
			base := randVec(rng, ys*m, 3)
			wb, xb := uploadBytes(t, c, wq), upload(t, c, xr)
			rowBytes, dot := k/32*18, llamaOrderQ4_0
			if tc.typ == quant.Q8_0 {
				rowBytes, dot = k/32*34, llamaOrderQ8_0
			}
			// MatMul takes fma() where the device fuses it; emulateFMA forces exact.glsl's
			// emulation, so devices with a fused fma() check both.
			for _, mode := range []string{"MatMul", "emulated fma"} {
				yb, ya := upload(t, c, base), upload(t, c, base)
				run(t, c, func(s *Seq) {
					if mode == "MatMul" {
						s.MatMul(tc.typ, wb.All(), xb.All(), yb.All(), k, n, m, xs, ys, false)
						s.MatMul(tc.typ, wb.All(), xb.All(), ya.All(), k, n, m, xs, ys, true)
						return
					}
					s.recordExactGEMM(tc.typ, wb.All(), xb.All(), yb.All(), k, n, m, xs, ys, false, emulateFMA)
					s.recordExactGEMM(tc.typ, wb.All(), xb.All(), ya.All(), k, n, m, xs, ys, true, emulateFMA)
				})
				got, gotAcc := readF32(t, yb, ys*m), readF32(t, ya, ys*m)
				for tok := 0; tok < m; tok++ {
					for r := 0; r < ys; r++ {
						i := tok*ys + r
						if r >= n {
							if got[i] != base[i] || gotAcc[i] != base[i] {
								t.Fatalf("%s: token %d: element %d past the %d rows was written", mode, tok, r, n)
							}
							continue
						}
						want := dot(wq[r*rowBytes:(r+1)*rowBytes], enc[tok])
						if got[i] != want || gotAcc[i] != base[i]+want {
							t.Fatalf("%s: token %d row %d: got %v (accumulated %v), want exactly %v (%v)", mode, tok, r, got[i], gotAcc[i], want, base[i]+want)
						}
					}
				}
			}
		})
	}
}

// The exact tier keeps every dispatch dimension within what all devices support.
func TestExactGEMMRejectsGridsPastTheDeviceLimit(t *testing.T) {
	c := ctxOrSkip(t)
	withTier(t, c, true)
	b := zeros(t, c, 64)
	s, err := c.NewSeq()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	s.MatMul(quant.Q4_0, b.All(), b.All(), b.All(), 32, 64, (maxGroups+1)*exactTokens, 32, 64, false)
	if err := s.End(); err == nil {
		t.Fatalf("%d tokens (%d token tiles) accepted", (maxGroups+1)*exactTokens, maxGroups+1)
	}
}

// recordSharedQ8Block records the shared-memory tier's 8-token GEMM (kernels.go's path before
// the exact tier), for the comparison in BenchmarkExactGEMM.
func recordSharedQ8Block(s *Seq, t quant.Type, w, x, y Binding, k, n, m int) {
	suf, _ := weightSuffix(t)
	kern := s.kernel("matmul_"+suf, 3, 32)
	if kern == nil {
		return
	}
	lanes := s.c.matmulLanes(m)
	gx, gy := grid1D((n + 64/lanes - 1) / (64 / lanes))
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(m), uint32(k), uint32(n), gx, uint32(0), uint32(lanes)),
		gx, gy, uint32((m+7)/8), w, x, y)
}

// BenchmarkExactGEMM times a k×n Q4_0 or Q8_0 weight times m tokens on the exact tier and on
// the shared-memory tier's 8-token kernels, GPU time from timestamps where the queue has them
// (else wall time), best of b.N runs after a warm-up, reps GEMMs per submit. The 4096x4096x512
// cases are the H200 measurement; the small case is for CPU implementations (lavapipe).
// Run: go test -run '^$' -bench ExactGEMM/q4_0/4096 -benchtime 3x ./engine/vulkan/
func BenchmarkExactGEMM(b *testing.B) {
	c := ctxOrSkip(b)
	for _, bc := range []struct {
		typ     quant.Type
		k, n, m int
		reps    int
	}{
		{quant.Q4_0, 4096, 4096, 512, 8},
		{quant.Q8_0, 4096, 4096, 512, 8},
		{quant.Q4_0, 1024, 512, 64, 1},
		{quant.Q8_0, 1024, 512, 64, 1},
	} {
		b.Run(fmt.Sprintf("%v/%dx%dx%d", bc.typ, bc.k, bc.n, bc.m), func(b *testing.B) {
			k, n, m := bc.k, bc.n, bc.m
			if c.Info.Type == "cpu" && k*n*m > 1<<28 {
				b.Skipf("%dx%dx%d is for GPUs: the shared tier takes minutes on %s", k, n, m, c.Info.Name)
			}
			rng := rand.New(rand.NewSource(1))
			wq, err := quant.Quantize(bc.typ, randVec(rng, k*n, 0.5))
			if err != nil {
				b.Fatal(err)
			}
			buf := func(data []byte) *Buffer { return benchBuffer(b, c, data) }
			x := randVec(rng, k*m, 1)
			xr := make([]float32, len(x))
			for tok := 0; tok < m; tok++ {
				enc := quant.QuantizeActivation(bc.typ, x[tok*k:(tok+1)*k], nil)
				if err := quant.Dequantize(quant.Q8_0, enc, xr[tok*k:(tok+1)*k]); err != nil {
					b.Fatal(err)
				}
			}
			wb, xb := buf(wq), buf(f32Bytes(xr))
			ye, ys := buf(make([]byte, 4*n*m)), buf(make([]byte, 4*n*m))
			ms := map[string]float64{}
			for _, tier := range []string{"shared", "exact"} {
				best := bestNsPerRep(b, c, bc.reps, func(s *Seq) {
					if tier == "exact" {
						s.MatMul(bc.typ, wb.All(), xb.All(), ye.All(), k, n, m, k, n, false)
					} else {
						recordSharedQ8Block(s, bc.typ, wb.All(), xb.All(), ys.All(), k, n, m)
					}
				}) / 1e6
				ms[tier] = best
				b.Logf("%s tier: %.3f ms per %dx%d %v x %d-token GEMM (%.1f GMAC/s)", tier, best, k, n, bc.typ, m, float64(k*n*m)/best/1e6)
			}
			e, sh := readF32B(b, ye, n*m), readF32B(b, ys, n*m)
			for i := range e {
				if e[i] != sh[i] {
					b.Fatalf("output %d: exact tier %v, shared tier %v", i, e[i], sh[i])
				}
			}
			b.ReportMetric(ms["shared"], "shared-ms")
			b.ReportMetric(ms["exact"], "exact-ms")
			b.ReportMetric(ms["shared"]/ms["exact"], "speedup")
		})
	}
}

func readF32B(b *testing.B, buf *Buffer, n int) []float32 {
	b.Helper()
	v, err := buf.ReadF32(0, n)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
