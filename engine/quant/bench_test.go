package quant

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// cpuTimer reports CPU time per operation (and weight GB/s over CPU time when bytes > 0),
// which stays meaningful when other processes share the machine.
func cpuTimer(b *testing.B, bytes int64) (stop func()) {
	runtime.LockOSThread()
	start := threadCPU()
	return func() {
		defer runtime.UnlockOSThread()
		used := threadCPU() - start
		if start == 0 || b.N == 0 || used < 20e6 { // too short for the clock's resolution
			return
		}
		cpu := float64(used) / float64(b.N)
		b.ReportMetric(cpu, "cpu-ns/op")
		if bytes > 0 {
			b.ReportMetric(float64(bytes)/cpu, "cpu-GB/s")
		}
	}
}

func benchMatVec(b *testing.B, typ Type, pureGo bool) {
	const rows, cols = 4096, 4096
	r := rand.New(rand.NewPCG(1, 1))
	row, _ := Quantize(typ, randVec(r, cols))
	rb := len(row)
	mat := make([]byte, rows*rb)
	for i := 0; i < rows; i++ {
		copy(mat[i*rb:], row)
		mat[i*rb+len(row)/2] ^= byte(i) // rows differ
	}
	x := randVec(r, cols)
	out := make([]float32, rows)
	if pureGo {
		defer forcePureGo()()
	}
	b.SetBytes(int64(len(mat)))
	stop := cpuTimer(b, int64(len(mat)))
	for b.Loop() {
		MatVec(typ, mat, rows, cols, x, out)
	}
	stop()
}

// BenchmarkMatVec4096 multiplies a 4096x4096 weight matrix with one vector on one thread,
// with the kernels Kernels() names ("fast") and with the pure Go kernels ("go"). MB/s is
// weight bytes per wall second; cpu-GB/s per CPU second of the benchmark's thread.
//
//	go test -run '^$' -bench MatVec4096 -benchtime 20x ./engine/quant/
func BenchmarkMatVec4096(b *testing.B) {
	for _, typ := range weightTypes {
		b.Run(typ.String()+"/fast", func(b *testing.B) { benchMatVec(b, typ, false) })
		b.Run(typ.String()+"/go", func(b *testing.B) { benchMatVec(b, typ, true) })
	}
}

// BenchmarkDotRow measures one 4096-element row against a cached activation (compute bound).
func BenchmarkDotRow(b *testing.B) {
	for _, typ := range weightTypes {
		b.Run(typ.String(), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			row, _ := Quantize(typ, randVec(r, 4096))
			xq := QuantizeActivation(typ, randVec(r, 4096), nil)
			b.SetBytes(int64(len(row)))
			stop := cpuTimer(b, 0)
			for b.Loop() {
				DotQuantized(typ, row, xq, 4096)
			}
			stop()
		})
	}
}

func BenchmarkQuantizeActivation4096(b *testing.B) {
	for _, typ := range []Type{Q8_0, Q4_1, Q4_K, F16} {
		b.Run(typ.String(), func(b *testing.B) {
			x := randVec(rand.New(rand.NewPCG(1, 1)), 4096)
			buf := QuantizeActivation(typ, x, nil)
			stop := cpuTimer(b, 0)
			for b.Loop() {
				buf = QuantizeActivation(typ, x, buf)
			}
			stop()
		})
	}
}

// BenchmarkDotRowBatch8 multiplies one 4096-element row with 8 cached activations, as prompt
// processing does; compare with 8x BenchmarkDotRow.
func BenchmarkDotRowBatch8(b *testing.B) {
	for _, typ := range []Type{Q8_0, Q4_0, Q4_K} {
		b.Run(typ.String(), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			row, _ := Quantize(typ, randVec(r, 4096))
			xqs := make([][]byte, 8)
			for i := range xqs {
				xqs[i] = QuantizeActivation(typ, randVec(r, 4096), nil)
			}
			out := make([]float32, 8)
			stop := cpuTimer(b, 0)
			for b.Loop() {
				DotQuantizedBatch(typ, row, xqs, 4096, out)
			}
			stop()
		})
	}
}
