package vulkan

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// stagedTypes are the weight types the prefill stages as fp16 for the cooperative matrix 2
// GEMM: every cooperative-matrix type but F16 (which that GEMM reads as it is).
func stagedTypes() []quant.Type {
	var out []quant.Type
	for _, typ := range append(append([]quant.Type{}, weightTypes...), iquantTypes...) {
		if typ != quant.F32 && typ != quant.F16 && typ != quant.BF16 {
			out = append(out, typ)
		}
	}
	return out
}

// The staging kernels write fp16(dq32's value), and dq32 equals quant.Dequantize bit for bit
// (the embedding tests), so each staged element must be exactly quant.F32ToF16 of the
// reference (round to nearest even). Rows 3..40 of 48 are staged into a buffer that starts
// with a sentinel row and ends with one, which must survive: row0 and the row count are
// honoured, and nothing is written past the rows asked for.
func TestDequantF16StagesEveryTypeAsRoundedReference(t *testing.T) {
	c := ctxOrSkip(t)
	const k, rows, row0, staged = 512, 48, 3, 38
	for _, typ := range stagedTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			rng := rand.New(rand.NewSource(int64(typ) + 77))
			var wq []byte
			if _, iq := iquantSuffix[typ]; iq {
				wq = randomIQBlocks(rng, typ, k*rows/typ.BlockSize(), iqElementScale(typ))
			} else {
				var err error
				if wq, err = quant.Quantize(typ, randVec(rng, k*rows, 0.5)); err != nil {
					t.Fatal(err)
				}
			}
			want := dequantized(t, typ, wq, k*rows)
			const sentinel = 0xabcd
			out := make([]byte, 2*k*(staged+2))
			for i := 0; i < len(out); i += 2 {
				binary.LittleEndian.PutUint16(out[i:], sentinel)
			}
			wb, hb := uploadBytes(t, c, wq), uploadBytes(t, c, out)
			run(t, c, func(s *Seq) { s.DequantF16(typ, wb.All(), hb.Range(uint64(2*k), uint64(2*k*staged)), k, staged, row0) })
			got, err := hb.Read(0, uint64(len(out)))
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < k*(staged+2); i++ {
				g := binary.LittleEndian.Uint16(got[2*i:])
				r := i/k - 1 // staged row, -1 and staged: the sentinels
				if r < 0 || r >= staged {
					if g != sentinel {
						t.Fatalf("element %d of sentinel row %d overwritten: %#04x", i%k, r, g)
					}
					continue
				}
				w := quant.F32ToF16(want[(row0+r)*k+i%k])
				if g != w && !(g&0x7fff == 0 && w&0x7fff == 0) {
					t.Fatalf("row %d element %d: got %#04x (%v), want %#04x (%v) from %v", row0+r, i%k, g, quant.F16ToF32(g), w, quant.F16ToF32(w), want[(row0+r)*k+i%k])
				}
			}
		})
	}
}

// DequantF16 refuses what it cannot stage: a type without a kernel, rows past the weight, a
// destination too small.
func TestDequantF16RefusesWhatItCannotStage(t *testing.T) {
	c := ctxOrSkip(t)
	wb := uploadBytes(t, c, make([]byte, 18*16*4)) // 4 rows of 512 Q4_0
	hb := uploadBytes(t, c, make([]byte, 2*512*4))
	for _, tc := range []struct {
		name          string
		typ           quant.Type
		k, rows, row0 int
		h             Binding
	}{
		{"f16 reads as it is", quant.F16, 512, 4, 0, hb.All()},
		{"rows past the weight", quant.Q4_0, 512, 4, 1, hb.All()},
		{"destination too small", quant.Q4_0, 512, 4, 0, hb.Range(0, 2*512*3)},
		{"k not whole blocks", quant.Q4_0, 500, 4, 0, hb.All()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := c.NewSeq()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Free()
			s.DequantF16(tc.typ, wb.All(), tc.h, tc.k, tc.rows, tc.row0)
			if s.err == nil {
				t.Fatal("recorded without an error")
			}
		})
	}
}

// BenchmarkStageF16 times DequantF16 alone on an 8B window's largest weight (14336 rows of
// 4096) for the types a prefill stages most, and prints the bytes it reads and writes per
// second against the device's memory bandwidth: the staging runs beside the products, so every
// GB/s it leaves on the table is taken from them. The blocks are random bytes (the kernel's
// speed does not depend on their values). Run: -test.run '^$' -test.bench StageF16 -test.benchtime 1x.
func BenchmarkStageF16(b *testing.B) {
	c := ctxOrSkip(b)
	const n, k, reps = 14336, 4096, 8
	rng := rand.New(rand.NewSource(3))
	stage := benchBuffer(b, c, make([]byte, 2*n*k))
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q4_0, quant.Q6_K, quant.Q8_0, quant.IQ2_XXS} {
		raw := make([]byte, n*k/typ.BlockSize()*typ.BlockBytes())
		rng.Read(raw)
		w := benchBuffer(b, c, raw)
		best := bestNsPerRep(b, c, reps, func(s *Seq) { s.DequantF16(typ, w.All(), stage.All(), k, n, 0) })
		moved := float64(len(raw) + 2*n*k)
		fmt.Printf("BenchmarkStageF16: %v %dx%d: %.1f us (%.0f GB/s read and written)\n", typ, n, k, best/1e3, moved/best)
		b.ReportMetric(moved/best, typ.String()+"-GB/s")
	}
}
