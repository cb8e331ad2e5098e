package vulkan

import (
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
		best := bestNsPerRep(b, c, reps, func(s *Seq) {
			s.MatMul(typ, wb.All(), xb.All(), yb.All(), k, n, 1, k, n, false)
		}) / 1e3
		b.Logf("%v: %.1f us per %dx%d matvec, %.0f GB/s of weights (%s tier)", typ, best, n, k, float64(len(wq))/best/1e3, map[bool]string{true: "exact", false: "fast"}[c.exact])
		b.ReportMetric(best, typ.String()+"-us")
	}
}

// BenchmarkShortPromptProducts times a 14336x4096 product for few tokens (1 takes the decode
// kernel, more a GEMM tier), GPU time from timestamps over 16 products per submit: what a short
// chat turn's prompt costs. Run on a real GPU: -test.run '^$' -test.bench ShortPrompt -test.benchtime 3x.
func BenchmarkShortPromptProducts(b *testing.B) {
	c := ctxOrSkip(b)
	if c.Info.Type == "cpu" {
		b.Skipf("%s is a CPU device: its timings say nothing about a GPU", c.Info.Name)
	}
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
