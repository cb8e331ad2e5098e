//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/vkllm/vkllm/engine/quant"
)

// haswell: AVX2 with FMA (every such CPU also has F16C).
var haswell = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func dotQ8_0AVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ4_0AVX2(w, x *byte, nb int) float32

func dotQ8_0(w, x []byte) float32 {
	nb := min(len(w), len(x)) / 34
	if !haswell || nb == 0 {
		return dotQ8_0Go(w, x)
	}
	return dotQ8_0AVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ4_0(w, x []byte) float32 {
	nb := min(len(w)/18, len(x)/34)
	if !haswell || nb == 0 {
		return dotQ4_0Go(w, x)
	}
	return dotQ4_0AVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

//go:noescape
func dotQ8_0AVX2x4(w, x0, x1, x2, x3 *byte, nb int, out *[4]float32)

//go:noescape
func dotQ4_0AVX2x4(w, x0, x1, x2, x3 *byte, nb int, out *[4]float32)

// llamaOrderDot4 computes llamaOrderDot of one weight row with four activation rows at once
// (one weight load per block), bit-identical to four llamaOrderDot calls. ok is false when
// the type has no four-row kernel here.
func llamaOrderDot4(t quant.Type, w []byte, x *[4][]byte, n int, out *[4]float32) bool {
	nb := n / 32
	if !haswell || nb == 0 {
		return false
	}
	switch t {
	case quant.Q8_0:
		_ = w[nb*34-1]
		for i := range x {
			_ = x[i][nb*34-1]
		}
		dotQ8_0AVX2x4(&w[0], &x[0][0], &x[1][0], &x[2][0], &x[3][0], nb, out)
		return true
	case quant.Q4_0:
		_ = w[nb*18-1]
		for i := range x {
			_ = x[i][nb*34-1]
		}
		dotQ4_0AVX2x4(&w[0], &x[0][0], &x[1][0], &x[2][0], &x[3][0], nb, out)
		return true
	}
	return false
}

// vnni: AVX-512 VNNI on 256-bit registers, for the prompt kernel.
var vnni = haswell && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

//go:noescape
func dotQ8_0VNNIx4(w, x0, x1, x2, x3 *byte, nb int, out *[4]float32)

// vnniDot4 is llamaOrderDot4 for Q8_0 weights with activations in the VNNI layout (see
// vnniActivation), bit-identical to it. ok is false when the CPU lacks VNNI.
func vnniDot4(w []byte, x *[4][]byte, n int, out *[4]float32) bool {
	nb := n / 32
	if !vnni || nb == 0 {
		return false
	}
	_ = w[nb*34-1]
	for i := range x {
		_ = x[i][nb*vnniBlockBytes-1]
	}
	dotQ8_0VNNIx4(&w[0], &x[0][0], &x[1][0], &x[2][0], &x[3][0], nb, out)
	return true
}

//go:noescape
func dotQ8_0VNNI2xN(w0, w1 *byte, x **byte, groups, nb int, out *float32)

// vnniDot2xN multiplies two Q8_0 weight rows with activation rows in the VNNI layout, four
// at a time: for group g, out[8g+j] = w0·x[4g+j] and out[8g+4+j] = w1·x[4g+j], each
// bit-identical to llamaOrderDot. len(x) must be a multiple of 4 and every x[i] must hold n
// values. ok is false when the CPU lacks VNNI.
func vnniDot2xN(w0, w1 []byte, x []*byte, xlen, n int, out []float32) bool {
	nb, groups := n/32, len(x)/4
	if !vnni || nb == 0 || groups == 0 {
		return false
	}
	if xlen < nb*vnniBlockBytes || len(w0) < nb*34 || len(w1) < nb*34 || len(out) < 8*groups || len(x) != 4*groups {
		panic("cpu: vnniDot2xN operands too short")
	}
	dotQ8_0VNNI2xN(&w0[0], &w1[0], &x[0], groups, nb, &out[0])
	return true
}
