package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/vkllm/vkllm/engine/quant"
)

// For Q8_0 and Q4_0 weights the CPU backend takes its dot products here rather than from
// quant.DotQuantized: the integer block sums are the same, but these kernels add the scaled
// block sums in llama.cpp's order (Q8_0: eight float lanes, each lane four products, folded
// (l0+l4 + l2+l6) + (l1+l5 + l3+l7); Q4_0: one running sum over blocks, as its x86 repacked
// kernels do). The order matters more than its size suggests: the next layer quantizes its
// input to 8 bits, so a last-bit difference can round a value the other way, and random-weight
// models amplify that into logit differences of ~0.1 and different greedy tokens.

// llamaOrderDot returns the dot product of a weight row of type t with activations quantized by
// quant.QuantizeActivation, in llama.cpp's summation order, and false for types it does not
// cover.
func llamaOrderDot(t quant.Type, w, x []byte, n int) (float32, bool) {
	switch t {
	case quant.Q8_0:
		return dotQ8_0(w[:n/32*34], x[:n/32*34]), true
	case quant.Q4_0:
		return dotQ4_0(w[:n/32*18], x[:n/32*34]), true
	}
	return 0, false
}

func f16At(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

// dotQ8_0Go is the portable form of dotQ8_0.
func dotQ8_0Go(w, x []byte) float32 {
	var lanes [8]float32
	for b := 0; b+34 <= len(w); b += 34 {
		wb, xb := w[b:b+34], x[b:b+34]
		d := f16At(wb) * f16At(xb)
		for l := 0; l < 8; l++ {
			var s int32
			for k := 2 + 4*l; k < 6+4*l; k++ {
				s += int32(int8(wb[k])) * int32(int8(xb[k]))
			}
			lanes[l] = fma32(d, float32(s), lanes[l])
		}
	}
	var t [4]float32
	for l := range t {
		t[l] = lanes[l+4] + lanes[l]
	}
	return (t[0] + t[2]) + (t[1] + t[3])
}

// dotQ4_0Go is the portable form of dotQ4_0.
func dotQ4_0Go(w, x []byte) float32 {
	var acc float32
	for b, c := 0, 0; b+18 <= len(w); b, c = b+18, c+34 {
		wb, xb := w[b:b+18], x[c:c+34]
		var s int32
		for j := 0; j < 16; j++ {
			s += (int32(wb[2+j]&15) - 8) * int32(int8(xb[2+j]))
			s += (int32(wb[2+j]>>4) - 8) * int32(int8(xb[18+j]))
		}
		acc = fma32(float32(s), f16At(wb)*f16At(xb), acc)
	}
	return acc
}

// vnniBlockBytes is the size of one Q8_0 activation block in the VNNI layout.
const vnniBlockBytes = 192

// vnniActivation rewrites the Q8_0 activation row q (34-byte blocks) into the layout of the
// VNNI prompt kernels, reusing dst: per block the 32 int8 values twice, eight int32
// corrections -128*(sum of each four values) twice, and the scale as float32 (twice, so that
// a 512-bit register holds the block for two weight rows), padded to three cache lines and
// aligned to 64 bytes so that no load straddles two lines. The kernels multiply unsigned
// weights w+128 with the signed values; adding the correction gives the exact signed sums.
func vnniActivation(q, dst []byte) []byte {
	nb := len(q) / 34
	if cap(dst) < nb*vnniBlockBytes {
		buf := make([]byte, nb*vnniBlockBytes+63)
		off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf)))) & 63
		dst = buf[off : off : off+nb*vnniBlockBytes]
	}
	dst = dst[:nb*vnniBlockBytes]
	for b := 0; b < nb; b++ {
		src, out := q[b*34:b*34+34], dst[b*vnniBlockBytes:(b+1)*vnniBlockBytes]
		copy(out[:32], src[2:34])
		copy(out[32:64], src[2:34])
		for l := 0; l < 8; l++ {
			var s int32
			for _, v := range src[2+4*l : 6+4*l] {
				s += int32(int8(v))
			}
			binary.LittleEndian.PutUint32(out[64+4*l:], uint32(-128*s))
			binary.LittleEndian.PutUint32(out[96+4*l:], uint32(-128*s))
		}
		binary.LittleEndian.PutUint32(out[128:], math.Float32bits(f16At(src)))
	}
	return dst
}
