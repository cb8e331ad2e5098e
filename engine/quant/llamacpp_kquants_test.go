package quant

import (
	"encoding/binary"
	"math"
	"os"
	"testing"
)

// testdata/llamacpp_kquants.bin holds rows of random Q2_K..Q6_K blocks (with sane block scales)
// and random activations, with what llama.cpp's own CPU library makes of them: the activations
// quantized to Q8_K (quantize_row_q8_K), the row dequantized (dequantize_row_*) and the row
// multiplied with those Q8_K bytes (ggml_vec_dot_*_q8_K, the AVX2 build llama.cpp picks on an
// AVX2 machine). testdata/llamacpp_kquants.py wrote it through ctypes from node-llama-cpp
// 3.22.1's prebuilt libraries (Q3_K has the most records: issue 12 suspected it). Records,
// little-endian, until EOF:
//
//	uint32 type id, uint32 n, uint32 row bytes R,
//	R row bytes, n float32 activations, n/256*292 Q8_K bytes, n float32 (dequantize_row), float32 (vec_dot)
func TestKQuantsAgreeWithLlamaCppLibrary(t *testing.T) {
	b, err := os.ReadFile("testdata/llamacpp_kquants.bin")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Type]int{}
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatal("truncated record header")
		}
		typ := Type(binary.LittleEndian.Uint32(b))
		n := int(binary.LittleEndian.Uint32(b[4:]))
		rb := int(binary.LittleEndian.Uint32(b[8:]))
		b = b[12:]
		qb := n / QKK * 292
		if n%QKK != 0 || len(b) < rb+4*n+qb+4*n+4 {
			t.Fatalf("%v: truncated record of %d values", typ, n)
		}
		row, x, q8 := b[:rb], f32View(b[rb:], n), b[rb+4*n:rb+4*n+qb]
		want := f32View(b[rb+4*n+qb:], n)
		wantDot := math.Float32frombits(binary.LittleEndian.Uint32(b[rb+8*n+qb:]))
		b = b[rb+8*n+qb+4:]
		seen[typ]++
		rec := seen[typ]
		if need, err := typ.RowBytes(n); err != nil || need != rb {
			t.Fatalf("%v: RowBytes(%d) = %d, %v; llama.cpp's row has %d bytes", typ, n, need, err, rb)
		}

		got := make([]float32, n)
		if err := Dequantize(typ, row, got); err != nil {
			t.Fatal(err)
		}
		for i, bad := 0, 0; i < n; i++ {
			if got[i] != want[i] {
				if bad++; bad <= 3 {
					t.Errorf("%v record %d: element %d = %g, llama.cpp %g", typ, rec, i, got[i], want[i])
				}
			}
		}

		if at := ActivationType(typ); at != Q8_K {
			t.Fatalf("%v pairs with %v activations, llama.cpp with Q8_K", typ, at)
		}
		xq := QuantizeActivation(typ, x, nil)
		for i, bad := 0, 0; i < qb; i++ {
			if xq[i] != q8[i] {
				if bad++; bad <= 3 {
					t.Errorf("%v record %d: Q8_K byte %d (block %d, offset %d) = %#x, llama.cpp %#x", typ, rec, i, i/292, i%292, xq[i], q8[i])
				}
			}
		}

		// Same integers, same scales: only float32 summation order may differ, so the
		// tolerance is relative to the sum of the terms' magnitudes (a row's blocks can cancel).
		var mag float64
		for i, w := range want {
			mag += math.Abs(float64(w) * 127 * actScale(Q8_K, q8, i/QKK))
		}
		if gotDot := DotQuantized(typ, row, q8, n); math.Abs(float64(gotDot-wantDot)) > 1e-6*mag {
			t.Errorf("%v record %d: DotQuantized = %g, llama.cpp %g (tolerance %g)", typ, rec, gotDot, wantDot, 1e-6*mag)
		}
	}
	for _, typ := range []Type{Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		if seen[typ] == 0 {
			t.Errorf("no llama.cpp record for %v", typ)
		}
	}
}
