package quant

import (
	"encoding/binary"
	"math"
	"os"
	"testing"
)

// testdata/llamacpp_iquants.bin holds, for each new type, rows of random blocks (with sane block
// scales) as llama.cpp's own reference code decodes them and multiplies them with random Q8_0/Q8_K
// activations. It was written by a throwaway C harness that compiled, unchanged, the functions
// dequantize_row_<type> of ggml/src/ggml-quants.c and ggml_vec_dot_<type>_q8_{0,K}_generic of
// ggml/src/ggml-cpu/quants.c, with the tables of ggml/src/ggml-common.h, from the ngxson/llama.cpp
// mirror at commit 3f545beccee69d9975f466ec7e45fd9aacd8ba90. Records, little-endian, until EOF:
//
//	uint32 type id, uint32 n, uint32 row bytes R, uint32 activation bytes A,
//	R row bytes, A activation bytes, n float32 (dequantize_row), float32 (vec_dot)
func TestIQuantsAgreeWithLlamaCppReference(t *testing.T) {
	b, err := os.ReadFile("testdata/llamacpp_iquants.bin")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Type]int{}
	for len(b) > 0 {
		if len(b) < 16 {
			t.Fatalf("truncated record header")
		}
		typ := Type(binary.LittleEndian.Uint32(b))
		n := int(binary.LittleEndian.Uint32(b[4:]))
		rb, ab := int(binary.LittleEndian.Uint32(b[8:])), int(binary.LittleEndian.Uint32(b[12:]))
		b = b[16:]
		if len(b) < rb+ab+4*n+4 {
			t.Fatalf("%v: truncated record", typ)
		}
		row, act := b[:rb], b[rb:rb+ab]
		want := f32View(b[rb+ab:], n)
		wantDot := math.Float32frombits(binary.LittleEndian.Uint32(b[rb+ab+4*n:]))
		b = b[rb+ab+4*n+4:]
		seen[typ]++
		if need, err := typ.RowBytes(n); err != nil || need != rb {
			t.Fatalf("%v: RowBytes(%d) = %d, %v; llama.cpp's row has %d bytes", typ, n, need, err, rb)
		}
		got := make([]float32, n)
		if err := Dequantize(typ, row, got); err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i := range got {
			if got[i] != want[i] {
				if bad++; bad <= 3 {
					t.Errorf("%v record %d: element %d = %g, llama.cpp %g", typ, seen[typ], i, got[i], want[i])
				}
			}
		}
		// Same integers, same scales: only float32 summation order may differ.
		var mag float64
		for i, w := range want {
			ai := i / ActivationType(typ).BlockSize()
			mag += math.Abs(float64(w) * 127 * actScale(ActivationType(typ), act, ai)) // a Q8_K scale may be negative
		}
		if gotDot := DotQuantized(typ, row, act, n); math.Abs(float64(gotDot-wantDot)) > 1e-6*mag {
			t.Errorf("%v record %d: DotQuantized = %g, llama.cpp %g (tolerance %g)", typ, seen[typ], gotDot, wantDot, 1e-6*mag)
		}
	}
	for _, typ := range newTypes {
		if seen[typ] == 0 {
			t.Errorf("no llama.cpp record for %v", typ)
		}
	}
}

// actScale is the scale of activation block i.
func actScale(at Type, act []byte, i int) float64 {
	if at == Q8_K {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(act[292*i:])))
	}
	return float64(half(act[34*i:]))
}
