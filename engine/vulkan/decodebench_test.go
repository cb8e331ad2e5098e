package vulkan

import (
	"math"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// BenchmarkDecodeMatvec times the decode product (one token) of a 14336x4096 weight, an 8B
// model's FFN gate shape, for every weight type: GPU time from timestamps over 16 products per
// submit, reported as weight bytes read per second (fewer rows where a binding would exceed
// the device's storage range). Random bytes stand in for the weights
// (timing does not depend on their values). Run on a real GPU:
// -test.run '^$' -test.bench DecodeMatvec -test.benchtime 3x.
func BenchmarkDecodeMatvec(b *testing.B) {
	testCtxOnce.Do(func() {
		testCtx, testCtxErr = Open(Options{Device: -1, Validate: true, Quiet: true})
	})
	if testCtxErr != nil {
		b.Skipf("no Vulkan context: %v", testCtxErr)
	}
	c := testCtx
	const k, reps = 4096, 16
	rng := rand.New(rand.NewSource(1))
	buf := func(data []byte) *Buffer {
		bb, err := c.NewBuffer(uint64(len(data)), false)
		if err != nil {
			b.Fatal(err)
		}
		if err := bb.Write(0, data); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(bb.Free)
		return bb
	}
	xb := buf(f32Bytes(randVec(rng, k, 1)))
	yb := buf(make([]byte, 4*14336))
	for _, typ := range weightTypes {
		rowBytes, err := typ.RowBytes(k)
		if err != nil {
			b.Fatal(err)
		}
		n := min(14336, int(c.Info.MaxStorageBufferRange)/rowBytes) // lavapipe binds 128 MiB at most
		wq := make([]byte, rowBytes*n)
		rng.Read(wq)
		wb := buf(wq)
		s, err := c.NewSeq()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.EnableTimestamps(2); err != nil {
			b.Fatal(err)
		}
		s.Stamp("start")
		for i := 0; i < reps; i++ {
			s.MatMul(typ, wb.All(), xb.All(), yb.All(), k, n, 1, k, n, false)
			s.Barrier()
		}
		s.Stamp("matvec")
		best := math.Inf(1)
		for i := 0; i < b.N+1; i++ { // the first run warms the pipeline
			if err := s.Run(); err != nil {
				b.Fatal(err)
			}
			tm, err := s.Timings()
			if err != nil {
				b.Fatal(err)
			}
			if i > 0 {
				best = math.Min(best, tm["matvec"]/1e3/reps)
			}
		}
		s.Free()
		b.Logf("%v: %.1f us per %dx%d matvec, %.0f GB/s of weights", typ, best, n, k, float64(len(wq))/best/1e3)
		b.ReportMetric(best, typ.String()+"-us")
	}
}

// BenchmarkShortPromptProducts times a 14336x4096 product for few tokens (1 takes the decode
// kernel, more a GEMM tier), GPU time from timestamps over 16 products per submit: what a short
// chat turn's prompt costs. Run on a real GPU: -test.run '^$' -test.bench ShortPrompt -test.benchtime 3x.
func BenchmarkShortPromptProducts(b *testing.B) {
	testCtxOnce.Do(func() {
		testCtx, testCtxErr = Open(Options{Device: -1, Validate: true, Quiet: true})
	})
	if testCtxErr != nil {
		b.Skipf("no Vulkan context: %v", testCtxErr)
	}
	c := testCtx
	if c.Info.Type == "cpu" {
		b.Skipf("%s is a CPU device: its timings say nothing about a GPU", c.Info.Name)
	}
	const k, n, reps = 4096, 14336, 16
	rng := rand.New(rand.NewSource(2))
	buf := func(data []byte) *Buffer {
		bb, err := c.NewBuffer(uint64(len(data)), false)
		if err != nil {
			b.Fatal(err)
		}
		if err := bb.Write(0, data); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(bb.Free)
		return bb
	}
	xb := buf(f32Bytes(randVec(rng, k*16, 1)))
	yb := buf(make([]byte, 4*n*16))
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q6_K, quant.Q4_0} {
		rowBytes, err := typ.RowBytes(k)
		if err != nil {
			b.Fatal(err)
		}
		wq := make([]byte, rowBytes*n)
		rng.Read(wq)
		wb := buf(wq)
		for _, m := range []int{1, 2, 5, 8, 9, 16} {
			s, err := c.NewSeq()
			if err != nil {
				b.Fatal(err)
			}
			if err := s.EnableTimestamps(2); err != nil {
				b.Fatal(err)
			}
			s.Stamp("start")
			for i := 0; i < reps; i++ {
				s.MatMul(typ, wb.All(), xb.All(), yb.All(), k, n, m, k, n, false)
				s.Barrier()
			}
			s.Stamp("products")
			best := math.Inf(1)
			for i := 0; i < b.N+1; i++ {
				if err := s.Run(); err != nil {
					b.Fatal(err)
				}
				tm, err := s.Timings()
				if err != nil {
					b.Fatal(err)
				}
				if i > 0 {
					best = math.Min(best, tm["products"]/1e3/reps)
				}
			}
			s.Free()
			b.Logf("%v x %d tokens: %.1f us per %dx%d product", typ, m, best, n, k)
		}
	}
}
