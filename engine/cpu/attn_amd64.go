//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"github.com/vkllm/vkllm/engine/quant"
)

//go:noescape
func dotF16AVX2(q *float32, k *uint16, n int) float64

//go:noescape
func madF16AVX2(acc, v *uint16, s float32, n int)

//go:noescape
func scaleF16AVX2(acc *uint16, s float32, n int)

// dotF16 is the dot product of an f16-rounded query with an f16 key row. Products of two f16
// values are exact in float32; they are summed in double precision.
func dotF16(a []float32, b []uint16) float32 {
	n := len(a) &^ 7
	if !haswell || n == 0 {
		return dotF16Go(a, b)
	}
	b = b[:len(a)]
	s := dotF16AVX2(unsafe.SliceData(a), unsafe.SliceData(b), n)
	for i := n; i < len(a); i++ {
		s += float64(a[i] * quant.F16ToF32(b[i]))
	}
	return float32(s)
}

// madF16 sets acc[i] = f16(fma(v[i], s, acc[i])): the f16 accumulation of llama.cpp's CPU
// flash-attention kernel.
func madF16(acc, v []uint16, s float32) {
	n := len(acc) &^ 7
	if !haswell || n == 0 {
		madF16Go(acc, v, s)
		return
	}
	v = v[:len(acc)]
	madF16AVX2(unsafe.SliceData(acc), unsafe.SliceData(v), s, n)
	madF16Go(acc[n:], v[n:], s)
}

// scaleF16 sets acc[i] = f16(acc[i] * s).
func scaleF16(acc []uint16, s float32) {
	n := len(acc) &^ 7
	if !haswell || n == 0 {
		scaleF16Go(acc, s)
		return
	}
	scaleF16AVX2(unsafe.SliceData(acc), s, n)
	scaleF16Go(acc[n:], s)
}

//go:noescape
func madF16Seq64(out *float32, v *uint16, vStride int, ms, vs *float32, npos int)

// madF16Seq runs the f16 value accumulation of one head over 64 dimensions and all
// len(ms) positions in registers: for each position t in order, acc = f16(acc*ms[t]) then
// acc = f16(fma(v[t*vStride:][:64], vs[t], acc)); out[:64] gets acc. ok is false when there is
// no such kernel.
func madF16Seq(out []float32, v []uint16, vStride int, ms, vs []float32) bool {
	np := len(ms)
	if !haswell || np == 0 {
		return false
	}
	_, _, _ = out[63], v[(np-1)*vStride+63], vs[np-1]
	madF16Seq64(&out[0], &v[0], vStride, &ms[0], &vs[0], np)
	return true
}

//go:noescape
func dotF16RowsAVX2(q *float32, k *uint16, kStride, n, npos int, scale float32, out *float32)

// dotF16Rows sets out[t] = dotF16(q, k[t*kStride:][:len(q)]) * scale for every t < len(out).
// ok is false when there is no kernel for this length here.
func dotF16Rows(q []float32, k []uint16, kStride int, scale float32, out []float32) bool {
	n, np := len(q), len(out)
	if !haswell || n == 0 || n%8 != 0 || np == 0 {
		return false
	}
	_ = k[(np-1)*kStride+n-1]
	dotF16RowsAVX2(&q[0], &k[0], kStride, n, np, scale, &out[0])
	return true
}
