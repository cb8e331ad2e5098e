package vulkan

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// BenchmarkDecodeMatvec times the decode product (one token) of a 14336x4096 weight, an 8B
// model's FFN gate shape, for every weight type: GPU time from timestamps over 16 products per
// submit, reported as weight bytes read per second (fewer rows where a binding would exceed
// the device's storage range). Random bytes stand in for the weights (timing does not depend on
// their values). Run on a real GPU: -test.run '^$' -test.bench DecodeMatvec -test.benchtime 3x.
func BenchmarkDecodeMatvec(b *testing.B) {
	c := ctxOrSkip(b)
	const k, reps = 4096, 16
	rng := rand.New(rand.NewSource(1))
	xb := benchBuffer(b, c, f32Bytes(randVec(rng, k, 1)))
	yb := benchBuffer(b, c, make([]byte, 4*14336))
	for _, typ := range weightTypes {
		rowBytes, err := typ.RowBytes(k)
		if err != nil {
			b.Fatal(err)
		}
		n := min(14336, int(c.Info.MaxStorageBufferRange)/rowBytes) // lavapipe binds 128 MiB at most
		wq := make([]byte, rowBytes*n)
		rng.Read(wq)
		wb := benchBuffer(b, c, wq)
		prevUnits := c.matvecUnits
		for _, units := range []int{1, 2} { // units a lane per pass (matvec_fast, matvec_fast2)
			if units == 2 && (c.exact || !fastMatvec2Types[typ]) {
				continue
			}
			c.matvecUnits = units
			best := bestNsPerRep(b, c, reps, func(s *Seq) {
				s.MatMul(typ, wb.All(), xb.All(), yb.All(), k, n, 1, k, n, false)
			}) / 1e3
			b.Logf("%v: %.1f us per %dx%d matvec, %.0f GB/s of weights (%s tier, %d units a pass)", typ, best, n, k, float64(len(wq))/best/1e3, map[bool]string{true: "exact", false: "fast"}[c.exact], units)
			b.ReportMetric(best, fmt.Sprintf("%v-u%d-us", typ, units))
		}
		c.matvecUnits = prevUnits
	}
}

// BenchmarkShortPromptProducts times a 14336x4096 product for few tokens (1 takes the decode
// kernel, more a GEMM tier), GPU time from timestamps over 16 products per submit: what a short
// chat turn's prompt costs. Run on a real GPU: -test.run '^$' -test.bench ShortPrompt -test.benchtime 3x.
func BenchmarkShortPromptProducts(b *testing.B) {
	c := gpuCtxOrSkip(b)
	const k, n, reps = 4096, 14336, 16
	rng := rand.New(rand.NewSource(2))
	xb := benchBuffer(b, c, f32Bytes(randVec(rng, k*16, 1)))
	yb := benchBuffer(b, c, make([]byte, 4*n*16))
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q4_0} {
		rowBytes, err := typ.RowBytes(k)
		if err != nil {
			b.Fatal(err)
		}
		wq := make([]byte, rowBytes*n)
		rng.Read(wq)
		wb := benchBuffer(b, c, wq)
		for _, m := range []int{1, 2, 5, 8, 9, 16} {
			best := bestNsPerRep(b, c, reps, func(s *Seq) {
				s.MatMul(typ, wb.All(), xb.All(), yb.All(), k, n, m, k, n, false)
			}) / 1e3
			b.Logf("%v x %d tokens: %.1f us per %dx%d product", typ, m, best, n, k)
		}
	}
}

// BenchmarkFusedDecode times the decode step's products both ways on an 8B model's shapes:
// matvec_fast after a separate rounding pass where the type needs one (what VKLLM_GPU_FUSED=0
// records) against matvec_dec (rounding, and for gate+up SwiGLU, in the one dispatch), GPU time
// from timestamps over 16 products per submit (each followed by a barrier, as in the token
// command), reported as weight bytes per second. Random bytes stand in for the weights. Run on
// a real GPU: -test.run '^$' -test.bench FusedDecode -test.benchtime 3x.
func BenchmarkFusedDecode(b *testing.B) {
	c := ctxOrSkip(b)
	if !c.fusedDecode || c.exact {
		b.Skipf("%s: no fused decode product here (int8 dot products, fast tier)", c.Info.Name)
	}
	const reps = 16
	rng := rand.New(rand.NewSource(3))
	xb := benchBuffer(b, c, f32Bytes(randVec(rng, 16384, 1)))
	xq := benchBuffer(b, c, make([]byte, 4*16384))
	gb := benchBuffer(b, c, f32Bytes(randVec(rng, 16384, 1)))
	yb := benchBuffer(b, c, make([]byte, 4*16384))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		for _, sh := range []struct {
			name string
			n, k int
			pair bool
		}{{"gate", 14336, 4096, false}, {"gate+up", 14336, 4096, true}, {"down", 4096, 14336, false}, {"attn_out", 4096, 4096, false}} {
			rowBytes, err := typ.RowBytes(sh.k)
			if err != nil {
				b.Fatal(err)
			}
			wq := make([]byte, rowBytes*sh.n)
			rng.Read(wq)
			wb, w2 := benchBuffer(b, c, wq), benchBuffer(b, c, wq)
			bytes := float64(len(wq))
			if sh.pair {
				bytes *= 2
			}
			old := bestNsPerRep(b, c, reps, func(s *Seq) {
				src := xb.All()
				if !c.roundsOwnActivations(typ, sh.k, 1) {
					s.QuantizeActivations(typ, xb.All(), xq.All(), sh.k, 1, sh.k)
					s.Barrier()
					src = xq.All()
				}
				s.MatMul(typ, wb.All(), src, yb.All(), sh.k, sh.n, 1, sh.k, sh.n, false)
				if sh.pair {
					s.MatMul(typ, w2.All(), src, yb.All(), sh.k, sh.n, 1, sh.k, sh.n, false)
					s.Barrier()
					s.SwiGLU(yb.All(), yb.All(), yb.All(), sh.n)
				}
			}) / 1e3
			g := gb.All()
			opt := FusedDecodeOptions{}
			if sh.pair {
				p := w2.All()
				opt = FusedDecodeOptions{Norm: &g, Eps: 1e-5, Pair: &p}
			}
			fused := bestNsPerRep(b, c, reps, func(s *Seq) {
				s.MatVecFused(typ, wb.All(), xb.All(), yb.All(), sh.k, sh.n, opt)
			}) / 1e3
			prevShare := c.matvecShareBelow
			c.matvecShareBelow = 0 // every subgroup its own rows, whatever the grid
			own := bestNsPerRep(b, c, reps, func(s *Seq) {
				s.MatVecFused(typ, wb.All(), xb.All(), yb.All(), sh.k, sh.n, opt)
			}) / 1e3
			c.matvecShareBelow = prevShare
			b.Logf("%v %s %dx%d: unfused %.1f us (%.0f GB/s), fused %.1f us (%.0f GB/s), fused with own rows %.1f us (%.0f GB/s)", typ, sh.name, sh.n, sh.k,
				old, bytes/old/1e3, fused, bytes/fused/1e3, own, bytes/own/1e3)
		}
	}
}

// BenchmarkArgmax times a decode step's greedy argmax over Qwen3's 151936 and Qwen3.5/3.6's
// 248320 logits in host-visible memory (where the resident driver keeps them) and in device
// memory: one workgroup (argmax) against many (argmax_wide). The decode profiles of session 17
// left ~0.3 and ~0.5 ms a token unstamped for these vocabularies. Run on a real GPU:
// -test.run '^$' -test.bench Argmax -test.benchtime 3x.
func BenchmarkArgmax(b *testing.B) {
	c := gpuCtxOrSkip(b)
	const reps = 8
	rng := rand.New(rand.NewSource(7))
	out, arrivals := benchBuffer(b, c, make([]byte, 4)), benchBuffer(b, c, make([]byte, 4))
	parts := benchBuffer(b, c, make([]byte, 8*argmaxMaxParts))
	for _, n := range []int{151936, 248320} {
		host, err := c.NewBuffer(uint64(4*n), true)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(host.Free)
		if err := host.WriteF32(0, randVec(rng, n, 1)); err != nil {
			b.Fatal(err)
		}
		dev := benchBuffer(b, c, f32Bytes(randVec(rng, n, 1)))
		for _, x := range []struct {
			where string
			buf   *Buffer
		}{{"host-visible", host}, {"device", dev}} {
			one := bestNsPerRep(b, c, reps, func(s *Seq) { s.Argmax(x.buf.All(), out.All(), n) }) / 1e3
			wide := bestNsPerRep(b, c, reps, func(s *Seq) { s.ArgmaxWide(x.buf.All(), out.All(), parts.All(), arrivals.All(), n) }) / 1e3
			fmt.Printf("argmax of %d logits in %s memory: one workgroup %.1f us, argmax_wide %.1f us (with its barrier)\n", n, x.where, one, wide)
		}
	}
}
