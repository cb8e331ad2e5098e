package quant

import (
	"strings"
	"testing"
)

// The hot-path functions have no error result: a caller passing inconsistent sizes gets a
// panic that names the function, the type and the sizes, never a bare index error.
func TestDotFunctionsPanicWithContextOnBadSizes(t *testing.T) {
	tests := []struct {
		name string
		want string
		call func()
	}{
		{"DotF32 short row", "quant.DotF32 Q4_0", func() { DotF32(Q4_0, make([]byte, 17), make([]float32, 32)) }},
		{"DotF32 partial block", "quant.DotF32", func() { DotF32(Q8_0, make([]byte, 34), make([]float32, 31)) }},
		{"DotQuantized partial block", "quant.DotQuantized Q4_K", func() { DotQuantized(Q4_K, make([]byte, 144), make([]byte, 292), 200) }},
		{"DotQuantized short row", "quant.DotQuantized Q8_0: 64 elements need 68 row bytes", func() { DotQuantized(Q8_0, make([]byte, 34), make([]byte, 68), 64) }},
		{"DotQuantized short activation", "quant.DotQuantized Q4_K", func() { DotQuantized(Q4_K, make([]byte, 144), make([]byte, 291), 256) }},
		{"DotQuantized unknown type", "quant.DotQuantized type(99)", func() { DotQuantized(Type(99), nil, nil, 0) }},
		{"QuantizeActivation partial block", "quant.QuantizeActivation", func() { QuantizeActivation(Q6_K, make([]float32, 100), nil) }},
		{"MatVec short matrix", "quant.MatVec Q8_0 2x32", func() { MatVec(Q8_0, make([]byte, 34), 2, 32, make([]float32, 32), make([]float32, 2)) }},
		{"MatVecQuantized short out", "quant.MatVecQuantized", func() {
			MatVecQuantized(Q8_0, make([]byte, 68), 2, 32, make([]byte, 34), make([]float32, 1))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, tc.want) {
					t.Fatalf("panic %v, want a message containing %q", r, tc.want)
				}
			}()
			tc.call()
		})
	}
}

func TestKernelsNamesAnImplementation(t *testing.T) {
	if k := Kernels(); k != "amd64-avx2" && k != "pure-go" {
		t.Fatalf("Kernels() = %q", k)
	}
}

// FuzzDequantizeNeverPanics feeds arbitrary bytes (NaN and infinite scales included) to every
// type's dequantizer and dot products.
func FuzzDequantizeNeverPanics(f *testing.F) {
	f.Add(uint8(0), []byte{0x00, 0x7c, 1, 2, 3})
	f.Add(uint8(10), make([]byte, 600))
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		typ := weightTypes[int(sel)%len(weightTypes)]
		bs, bb := typ.BlockSize(), typ.BlockBytes()
		n := len(data) / bb * bs
		n -= n % QKK // whole activation blocks for every type
		if n == 0 {
			if err := Dequantize(typ, data, make([]float32, bs)); len(data) < bb && err == nil {
				t.Fatalf("%v: short source accepted", typ)
			}
			return
		}
		dst := make([]float32, n)
		if err := Dequantize(typ, data, dst); err != nil {
			t.Fatal(err)
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		DotF32(typ, data, x)
		DotQuantized(typ, data, QuantizeActivation(typ, x, nil), n)
	})
}
