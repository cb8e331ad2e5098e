package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Quantize encodes src as type t with round-to-nearest reference quantizers.
// len(src) must be a multiple of t's block size. The quantizers favour simplicity over
// the error-minimising searches of other tools: they exist to build test models.
func Quantize(t Type, src []float32) ([]byte, error) {
	n, err := t.RowBytes(len(src))
	if err != nil {
		return nil, fmt.Errorf("quantize: %w", err)
	}
	dst := make([]byte, n)
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return dst, nil
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
		return dst, nil
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
		return dst, nil
	}
	var f func(x []float32, b []byte)
	switch t {
	case Q4_0:
		f = quantQ4_0
	case Q4_1:
		f = quantQ4_1
	case Q5_0:
		f = quantQ5_0
	case Q5_1:
		f = quantQ5_1
	case Q8_0:
		f = quantQ8_0
	case Q8_1:
		f = quantQ8_1
	case Q2_K:
		f = quantQ2K
	case Q3_K:
		f = quantQ3K
	case Q4_K:
		f = quantQ4K
	case Q5_K:
		f = quantQ5K
	case Q6_K:
		f = quantQ6K
	case Q8_K:
		f = quantQ8K
	case IQ4_NL:
		f = quantIQ4NL
	case IQ4_XS:
		f = quantIQ4XS
	case MXFP4:
		f = quantMXFP4
	default:
		if c := gridCoderOf(t); c != nil {
			f = c.quantize
			break
		}
		return nil, fmt.Errorf("quantize %v: type not supported", t)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	for i := 0; i < len(src)/bs; i++ {
		f(src[i*bs:(i+1)*bs], dst[i*bb:(i+1)*bb])
	}
	return dst, nil
}

func putHalf(b []byte, v float32) float32 {
	h := F32ToF16(v)
	binary.LittleEndian.PutUint16(b, h)
	return f16Table[h]
}

// absMax returns the element with the largest magnitude (keeping its sign) and that magnitude.
func absMax(x []float32) (signed, amax float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, signed = a, v
		}
	}
	return signed, amax
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	return lo, hi
}

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

func roundEven(v float32) int { return int(math.RoundToEven(float64(v))) }

func clampInt(v, lo, hi int) int { return max(lo, min(hi, v)) }

func quantQ8_0(x []float32, b []byte) {
	_, amax := absMax(x)
	d := amax / 127
	id := inv(d)
	putHalf(b, d)
	for j, v := range x[:32] {
		b[2+j] = byte(int8(roundEven(v * id)))
	}
}

func quantQ8_1(x []float32, b []byte) {
	_, amax := absMax(x)
	d := amax / 127
	id := inv(d)
	putHalf(b, d)
	sum := 0
	for j, v := range x[:32] {
		q := roundEven(v * id)
		sum += q
		b[4+j] = byte(int8(q))
	}
	putHalf(b[2:], float32(sum)*d)
}

// packNibbles stores the low 4 bits of 32 quants in 16 bytes, element j in the low nibble of
// byte j and element j+16 in its high nibble, and returns the fifth bits (bit j of the
// result is bit 4 of element j), which the Q5 types keep in their qh word.
func packNibbles(q *[32]int, qs []byte) (qh uint32) {
	for j := 0; j < 16; j++ {
		qs[j] = byte(q[j]&0xf) | byte(q[j+16]&0xf)<<4
		qh |= uint32(q[j]>>4&1) << j
		qh |= uint32(q[j+16]>>4&1) << (j + 16)
	}
	return qh
}

// quantSym quantizes a 32-element block symmetrically to [0, 2*half-1] with zero at half,
// storing d and returning the quants.
func quantSym(x []float32, b []byte, halfRange int) (q [32]int) {
	maxv, _ := absMax(x)
	d := putHalf(b, maxv/-float32(halfRange))
	id := inv(d)
	for j, v := range x[:32] {
		q[j] = clampInt(roundEven(v*id)+halfRange, 0, 2*halfRange-1)
	}
	return q
}

// quantAffine quantizes a 32-element block to [0, nmax] as q*d + m, storing d and m.
func quantAffine(x []float32, b []byte, nmax int) (q [32]int) {
	lo, hi := minMax(x[:32])
	d := putHalf(b, (hi-lo)/float32(nmax))
	m := putHalf(b[2:], lo)
	id := inv(d)
	for j, v := range x[:32] {
		q[j] = clampInt(roundEven((v-m)*id), 0, nmax)
	}
	return q
}

func quantQ4_0(x []float32, b []byte) {
	q := quantSym(x, b, 8)
	packNibbles(&q, b[2:18])
}

func quantQ5_0(x []float32, b []byte) {
	q := quantSym(x, b, 16)
	qh := packNibbles(&q, b[6:22])
	binary.LittleEndian.PutUint32(b[2:], qh)
}

func quantQ4_1(x []float32, b []byte) {
	q := quantAffine(x, b, 15)
	packNibbles(&q, b[4:20])
}

func quantQ5_1(x []float32, b []byte) {
	q := quantAffine(x, b, 31)
	qh := packNibbles(&q, b[8:24])
	binary.LittleEndian.PutUint32(b[4:], qh)
}

// quantQ8K follows the activation quantizer of the K-quant dot products:
// d = -max/127 where max is the signed element of largest magnitude.
func quantQ8K(x []float32, b []byte) {
	xs := (*[256]float32)(x)
	var maxv, amax float32
	for _, v := range xs {
		if a := abs32(v); a > amax {
			amax, maxv = a, v
		}
	}
	if amax == 0 {
		clear(b[:292])
		return
	}
	iscale := -127 / maxv
	binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
	qs := (*[256]byte)(b[4:260])
	for j, v := range xs {
		qs[j] = byte(int8(min(127, nearestInt(iscale*v))))
	}
	for g := 0; g < 16; g++ {
		var s int32
		for _, q := range (*[16]byte)(qs[16*g:]) {
			s += int32(int8(q))
		}
		binary.LittleEndian.PutUint16(b[260+2*g:], uint16(int16(s)))
	}
}

// affineSub computes, for each sub-block of size sub, a scale and a non-negative min so that
// x ≈ scale*q - min with q in [0, nmax].
func affineSub(x []float32, sub, nmax int, scales, mins []float32) {
	for j := range scales {
		lo, hi := minMax(x[j*sub : (j+1)*sub])
		lo = min(lo, 0)
		scales[j] = (hi - lo) / float32(nmax)
		mins[j] = -lo
	}
}

// quantSubScales maps float sub-block scales to integers in [0, smax] with one f16 super-scale,
// stored at b, and returns the integers.
func quantSubScales(v []float32, smax int, b []byte, out []int) float32 {
	var vmax float32
	for _, s := range v {
		vmax = max(vmax, s)
	}
	d := putHalf(b, vmax/float32(smax))
	id := inv(d)
	for j, s := range v {
		out[j] = clampInt(roundEven(s*id), 0, smax)
	}
	return d
}

// quantKAffine quantizes a 256-element super-block with 8 sub-blocks of 32 (Q4_K, Q5_K),
// writing d, dmin and the packed 6-bit scales and returning the quants.
func quantKAffine(x []float32, b []byte, nmax int) (q [256]int) {
	var scales, mins [8]float32
	affineSub(x, 32, nmax, scales[:], mins[:])
	var sc, mn [8]int
	d := quantSubScales(scales[:], 63, b, sc[:])
	dmin := quantSubScales(mins[:], 63, b[2:], mn[:])
	s := b[4:16]
	clear(s)
	for j := 0; j < 8; j++ {
		if j < 4 {
			s[j] = byte(sc[j])
			s[j+4] = byte(mn[j])
		} else {
			s[j+4] = byte(sc[j]&0xf) | byte(mn[j]&0xf)<<4
			s[j-4] |= byte(sc[j]>>4) << 6
			s[j] |= byte(mn[j]>>4) << 6
		}
		step := d * float32(sc[j])
		off := dmin * float32(mn[j])
		id := inv(step)
		for l := 0; l < 32; l++ {
			e := 32*j + l
			q[e] = clampInt(roundEven((x[e]+off)*id), 0, nmax)
		}
	}
	return q
}

func quantQ4K(x []float32, b []byte) {
	q := quantKAffine(x, b, 15)
	qs := b[16:144]
	for c := 0; c < 4; c++ {
		for l := 0; l < 32; l++ {
			qs[32*c+l] = byte(q[64*c+l]) | byte(q[64*c+32+l])<<4
		}
	}
}

func quantQ5K(x []float32, b []byte) {
	q := quantKAffine(x, b, 31)
	qh := b[16:48]
	qs := b[48:176]
	clear(qh)
	for c := 0; c < 4; c++ {
		for l := 0; l < 32; l++ {
			lo, hi := q[64*c+l], q[64*c+32+l]
			qs[32*c+l] = byte(lo&0xf) | byte(hi&0xf)<<4
			qh[l] |= byte(lo>>4&1)<<(2*c) | byte(hi>>4&1)<<(2*c+1)
		}
	}
}

func quantQ2K(x []float32, b []byte) {
	var scales, mins [16]float32
	affineSub(x, 16, 3, scales[:], mins[:])
	var sc, mn [16]int
	d := quantSubScales(scales[:], 15, b[80:], sc[:])
	dmin := quantSubScales(mins[:], 15, b[82:], mn[:])
	qs := b[16:80]
	clear(qs)
	for j := 0; j < 16; j++ {
		b[j] = byte(sc[j]) | byte(mn[j])<<4
		half, k, part := j/8, (j%8)/2, j%2
		step := d * float32(sc[j])
		off := dmin * float32(mn[j])
		id := inv(step)
		for l := 0; l < 16; l++ {
			v := clampInt(roundEven((x[16*j+l]+off)*id), 0, 3)
			qs[32*half+16*part+l] |= byte(v) << (2 * k)
		}
	}
}

// symSubScales computes signed sub-block scales so that the element of largest magnitude
// maps to -qneg, then encodes them as integers in [-smax-1, smax] (smax+1 = sneg) relative
// to one super-scale d, which it returns (already rounded to f16 when half is set).
func symSubScales(x []float32, sub, qneg int, sneg int, out []int) float32 {
	var scales [16]float32
	var maxScale, amax float32
	for j := range out {
		m, _ := absMax(x[j*sub : (j+1)*sub])
		scales[j] = m / -float32(qneg)
		if a := float32(math.Abs(float64(scales[j]))); a > amax {
			amax, maxScale = a, scales[j]
		}
	}
	if amax == 0 {
		clear(out)
		return 0
	}
	iscale := -float32(sneg) / maxScale
	for j := range out {
		out[j] = clampInt(roundEven(iscale*scales[j]), -sneg, sneg-1)
	}
	return 1 / iscale
}

func quantQ3K(x []float32, b []byte) {
	var sc [16]int
	d := symSubScales(x, 16, 4, 32, sc[:])
	d = putHalf(b[108:], d)
	hm := b[:32]
	qs := b[32:96]
	s := b[96:108]
	clear(b[:108])
	for j := 0; j < 16; j++ {
		v := byte(sc[j] + 32)
		if j < 8 {
			s[j] |= v & 0xf
		} else {
			s[j-8] |= (v & 0xf) << 4
		}
		s[8+j%4] |= (v >> 4) << (2 * (j / 4))
		half, k, part := j/8, (j%8)/2, j%2
		id := inv(d * float32(sc[j]))
		for l := 0; l < 16; l++ {
			q := clampInt(roundEven(x[16*j+l]*id), -4, 3) + 4
			qs[32*half+16*part+l] |= byte(q&3) << (2 * k)
			if q >= 4 {
				hm[16*part+l] |= 1 << (4*half + k)
			}
		}
	}
}

func quantQ6K(x []float32, b []byte) {
	var sc [16]int
	d := symSubScales(x, 16, 32, 128, sc[:])
	d = putHalf(b[208:], d)
	ql := b[:128]
	qh := b[128:192]
	clear(b[:208])
	for j := 0; j < 16; j++ {
		b[192+j] = byte(int8(sc[j]))
	}
	for e := 0; e < 256; e++ {
		id := inv(d * float32(sc[e/16]))
		q := clampInt(roundEven(x[e]*id), -32, 31) + 32
		h, r := e/128, e%128
		g, l := r/32, r%32
		idx := 64*h + l
		if g&1 == 1 {
			idx += 32
		}
		if g >= 2 {
			ql[idx] |= byte(q&0xf) << 4
		} else {
			ql[idx] |= byte(q & 0xf)
		}
		qh[32*h+l] |= byte(q>>4) << (2 * g)
	}
}
