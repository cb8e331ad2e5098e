package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

func half(b []byte) float32 { return f16Table[binary.LittleEndian.Uint16(b)] }

// Dequantize expands len(dst) elements of type t from src into dst.
// len(dst) must be a multiple of t's block size and src must hold at least that many blocks.
func Dequantize(t Type, src []byte, dst []float32) error {
	need, err := t.RowBytes(len(dst))
	if err != nil {
		return fmt.Errorf("dequantize: %w", err)
	}
	if len(src) < need {
		return fmt.Errorf("dequantize %d elements of %v: need %d bytes, have %d", len(dst), t, need, len(src))
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
		return nil
	case F16:
		for i := range dst {
			dst[i] = f16Table[binary.LittleEndian.Uint16(src[2*i:])]
		}
		return nil
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
		return nil
	}
	f := blockDequantizer(t)
	if f == nil {
		return fmt.Errorf("dequantize %v: type not supported", t)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	for i := 0; i < len(dst)/bs; i++ {
		f(src[i*bb:(i+1)*bb], dst[i*bs:(i+1)*bs])
	}
	return nil
}

func blockDequantizer(t Type) func(b []byte, y []float32) {
	switch t {
	case Q4_0:
		return dequantQ4_0
	case Q4_1:
		return dequantQ4_1
	case Q5_0:
		return dequantQ5_0
	case Q5_1:
		return dequantQ5_1
	case Q8_0:
		return dequantQ8_0
	case Q8_1:
		return dequantQ8_1
	case Q2_K:
		return dequantQ2K
	case Q3_K:
		return dequantQ3K
	case Q4_K:
		return dequantQ4K
	case Q5_K:
		return dequantQ5K
	case Q6_K:
		return dequantQ6K
	case Q8_K:
		return dequantQ8K
	case IQ4_NL:
		return dequantIQ4NL
	case IQ4_XS:
		return dequantIQ4XS
	case MXFP4:
		return dequantMXFP4
	}
	if gq := gridQuantOf(t); gq != nil {
		return gq.dequant
	}
	return nil
}

// Q4_0: f16 d, 16 bytes; element j<16 is the low nibble of byte j, element j+16 its high nibble; x = (q-8)*d.
func dequantQ4_0(b []byte, y []float32) {
	d := half(b)
	qs := b[2:18]
	y = y[:32]
	for j := 0; j < 16; j++ {
		y[j] = float32(int(qs[j]&0xf)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

// Q4_1: f16 d, f16 m, 16 bytes of nibbles; x = q*d + m.
func dequantQ4_1(b []byte, y []float32) {
	d, m := half(b), half(b[2:])
	qs := b[4:20]
	y = y[:32]
	for j := 0; j < 16; j++ {
		y[j] = float32(qs[j]&0xf)*d + m
		y[j+16] = float32(qs[j]>>4)*d + m
	}
}

// Q5_0: f16 d, uint32 qh (bit j = fifth bit of element j), 16 bytes of nibbles; x = (q-16)*d.
func dequantQ5_0(b []byte, y []float32) {
	d := half(b)
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := b[6:22]
	y = y[:32]
	for j := 0; j < 16; j++ {
		lo := int(qs[j]&0xf) | int(qh>>j&1)<<4
		hi := int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
		y[j] = float32(lo-16) * d
		y[j+16] = float32(hi-16) * d
	}
}

// Q5_1: f16 d, f16 m, uint32 qh, 16 bytes of nibbles; x = q*d + m.
func dequantQ5_1(b []byte, y []float32) {
	d, m := half(b), half(b[2:])
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := b[8:24]
	y = y[:32]
	for j := 0; j < 16; j++ {
		lo := int(qs[j]&0xf) | int(qh>>j&1)<<4
		hi := int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
		y[j] = float32(lo)*d + m
		y[j+16] = float32(hi)*d + m
	}
}

// Q8_0: f16 d, 32 int8; x = q*d.
func dequantQ8_0(b []byte, y []float32) { scaleInt8(half(b), b[2:34], y[:32]) }

// Q8_1: f16 d, f16 s (= d * sum of q), 32 int8; x = q*d.
func dequantQ8_1(b []byte, y []float32) { scaleInt8(half(b), b[4:36], y[:32]) }

// scaleInt8 writes y[j] = q[j]*d for the int8 quants of one block.
func scaleInt8(d float32, qs []byte, y []float32) {
	qs = qs[:len(y)]
	for j := range y {
		y[j] = float32(int8(qs[j])) * d
	}
}

// Q8_K: f32 d, 256 int8, 16 int16 block sums; x = q*d.
func dequantQ8K(b []byte, y []float32) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(b))
	qs := b[4 : 4+256]
	y = y[:256]
	for j := range y {
		y[j] = float32(int8(qs[j])) * d
	}
}

// Q2_K: 16 bytes of scales (low nibble scale, high nibble min, one per 16 elements),
// 64 bytes of 2-bit quants, f16 d, f16 dmin; x = d*sc*q - dmin*m.
// Byte l of a 32-byte group holds, at bit 2k, the element 32k+l of that 128-element half.
func dequantQ2K(b []byte, y []float32) {
	sc := b[:16]
	qs := b[16:80]
	d, dmin := half(b[80:]), half(b[82:])
	y = y[:256]
	for j := 0; j < 16; j++ { // sub-block of 16 elements
		half, k, part := j/8, (j%8)/2, j%2
		dl := d * float32(sc[j]&0xf)
		ml := dmin * float32(sc[j]>>4)
		q := qs[32*half+16*part:]
		out := y[16*j : 16*j+16]
		shift := uint(2 * k)
		for l := range out {
			out[l] = dl*float32(q[l]>>shift&3) - ml
		}
	}
}

// q3Scales decodes the twelve packed bytes of a Q3_K block into 16 signed 6-bit scales.
func q3Scales(s []byte, out *[16]int8) {
	s = s[:12]
	for j := 0; j < 16; j++ {
		var lo byte
		if j < 8 {
			lo = s[j] & 0xf
		} else {
			lo = s[j-8] >> 4
		}
		hi := s[8+j%4] >> (2 * (j / 4)) & 3
		out[j] = int8(lo|hi<<4) - 32
	}
}

// Q3_K: 32 bytes hmask, 64 bytes of 2-bit quants, 12 bytes of packed 6-bit scales, f16 d;
// x = d*sc*(q - 4*(1-h)) where h is the element's bit in hmask.
func dequantQ3K(b []byte, y []float32) {
	hm := b[:32]
	qs := b[32:96]
	var sc [16]int8
	q3Scales(b[96:108], &sc)
	d := half(b[108:])
	y = y[:256]
	for j := 0; j < 16; j++ {
		half, k, part := j/8, (j%8)/2, j%2
		dl := d * float32(sc[j])
		q := qs[32*half+16*part:]
		h := hm[16*part:]
		mask := byte(1) << uint(4*half+k)
		shift := uint(2 * k)
		out := y[16*j : 16*j+16]
		for l := range out {
			v := int(q[l] >> shift & 3)
			if h[l]&mask == 0 {
				v -= 4
			}
			out[l] = dl * float32(v)
		}
	}
}

// scaleMinK4 returns the 6-bit scale and min of sub-block j from the 12 packed bytes
// of a Q4_K/Q5_K block.
func scaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xf | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// Q4_K: f16 d, f16 dmin, 12 bytes of packed 6-bit scales/mins, 128 bytes of nibbles.
// Chunk c (64 elements) uses bytes 32c..32c+31: low nibbles are sub-block 2c, high nibbles 2c+1.
// x = d*sc*q - dmin*m.
func dequantQ4K(b []byte, y []float32) {
	d, dmin := half(b), half(b[2:])
	s := b[4:16]
	qs := b[16:144]
	y = y[:256]
	for c := 0; c < 4; c++ {
		sc1, m1 := scaleMinK4(2*c, s)
		sc2, m2 := scaleMinK4(2*c+1, s)
		d1, o1 := d*float32(sc1), dmin*float32(m1)
		d2, o2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*c : 32*c+32]
		out := y[64*c : 64*c+64]
		for l := 0; l < 32; l++ {
			out[l] = d1*float32(q[l]&0xf) - o1
			out[l+32] = d2*float32(q[l]>>4) - o2
		}
	}
}

// Q5_K: like Q4_K plus 32 bytes qh; bit 2c of qh[l] is the fifth bit of element 64c+l,
// bit 2c+1 that of element 64c+32+l.
func dequantQ5K(b []byte, y []float32) {
	d, dmin := half(b), half(b[2:])
	s := b[4:16]
	qh := b[16:48]
	qs := b[48:176]
	y = y[:256]
	for c := 0; c < 4; c++ {
		sc1, m1 := scaleMinK4(2*c, s)
		sc2, m2 := scaleMinK4(2*c+1, s)
		d1, o1 := d*float32(sc1), dmin*float32(m1)
		d2, o2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*c : 32*c+32]
		out := y[64*c : 64*c+64]
		for l := 0; l < 32; l++ {
			lo := q[l]&0xf | (qh[l]>>(2*c)&1)<<4
			hi := q[l]>>4 | (qh[l]>>(2*c+1)&1)<<4
			out[l] = d1*float32(lo) - o1
			out[l+32] = d2*float32(hi) - o2
		}
	}
}

// Q6_K: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales, f16 d;
// x = d*sc*(q-32). In each 128-element half h, for l<32:
// element l    = ql[l]    low  | qh[l] bits 0-1
// element l+32 = ql[l+32] low  | qh[l] bits 2-3
// element l+64 = ql[l]    high | qh[l] bits 4-5
// element l+96 = ql[l+32] high | qh[l] bits 6-7
// and the scale of element e (within the half) is scales[8h + e/16].
func dequantQ6K(b []byte, y []float32) {
	ql := b[:128]
	qh := b[128:192]
	sc := b[192:208]
	d := half(b[208:])
	y = y[:256]
	for h := 0; h < 2; h++ {
		l4 := ql[64*h : 64*h+64]
		h2 := qh[32*h : 32*h+32]
		s := sc[8*h : 8*h+8]
		out := y[128*h : 128*h+128]
		for l := 0; l < 32; l++ {
			q1 := int(l4[l]&0xf|(h2[l]&3)<<4) - 32
			q2 := int(l4[l+32]&0xf|(h2[l]>>2&3)<<4) - 32
			q3 := int(l4[l]>>4|(h2[l]>>4&3)<<4) - 32
			q4 := int(l4[l+32]>>4|(h2[l]>>6&3)<<4) - 32
			is := l / 16
			out[l] = d * float32(int8(s[is])) * float32(q1)
			out[l+32] = d * float32(int8(s[is+2])) * float32(q2)
			out[l+64] = d * float32(int8(s[is+4])) * float32(q3)
			out[l+96] = d * float32(int8(s[is+6])) * float32(q4)
		}
	}
}
