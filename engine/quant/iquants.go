package quant

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The non-linear quants (IQ4_NL, IQ4_XS, MXFP4) map each 4-bit code through a 16-entry table;
// the grid i-quants (IQ1_S … IQ3_S) store, per 8 (or 4) elements, an index into a published
// codebook grid of magnitudes plus sign bits, with integer scales per 32 or 16 elements.
// Layouts, formulas and tables follow GGML's ggml-common.h and ggml-quants.c; grids.go is
// generated from ggml-common.h by gengrids.go.

// kvaluesIQ4NL is GGML's kvalues_iq4nl: the IQ4_NL and IQ4_XS codebook.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesFP4 is GGML's kvalues_mxfp4: the E2M1 values (±0, 0.5, 1, 1.5, 2, 3, 4, 6) doubled.
var kvaluesFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half returns half the E8M0 scale 2^(e-127), as GGML_E8M0_TO_FP32_HALF does (the halving
// undoes the doubled kvaluesFP4).
func e8m0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// IQ4_NL: f16 d, 16 bytes; element j<16 is the low nibble of byte j, element j+16 its high
// nibble; x = d*kvaluesIQ4NL[q].
func dequantIQ4NL(b []byte, y []float32) { dequantNibbles(half(b), &kvaluesIQ4NL, b[2:18], y) }

// MXFP4: E8M0 exponent byte e, 16 bytes of nibbles as IQ4_NL; x = 2^(e-127) * E2M1(q)
// (= e8m0Half(e)*kvaluesFP4[q]).
func dequantMXFP4(b []byte, y []float32) { dequantNibbles(e8m0Half(b[0]), &kvaluesFP4, b[1:17], y) }

func dequantNibbles(d float32, kv *[16]int8, qs []byte, y []float32) {
	qs, y = qs[:16], y[:32]
	for j, q := range qs {
		y[j] = d * float32(kv[q&0xf])
		y[j+16] = d * float32(kv[q>>4])
	}
}

// IQ4_XS: f16 d, uint16 scales_h, 4 bytes scales_l, 128 bytes of nibbles. Sub-block g (32
// elements) has the 6-bit scale ls = nibble g of scales_l (low nibble first) | bits 2g,2g+1 of
// scales_h << 4; its 16 bytes at 16g hold elements as IQ4_NL; x = d*(ls-32)*kvaluesIQ4NL[q].
func dequantIQ4XS(b []byte, y []float32) {
	d := half(b)
	for g := 0; g < 8; g++ {
		dequantNibbles(d*float32(iq4xsScale(b, g)), &kvaluesIQ4NL, b[8+16*g:], y[32*g:])
	}
}

func iq4xsScale(b []byte, g int) int32 {
	h := binary.LittleEndian.Uint16(b[2:])
	return int32(b[4+g/2]>>(4*(g%2))&0xf|byte(h>>(2*g)&3)<<4) - 32
}

// dotNibbleQ8_0 is the dot of IQ4_NL or MXFP4 weights (blocks of bb bytes, the scale from
// scale, the nibbles from byte off) with Q8_0 activations, as llama.cpp's CPU backend computes it.
func dotNibbleQ8_0(w, x []byte, bb, off int, kv *[16]int8, scale func([]byte) float32) float32 {
	var s float32
	for len(w) >= bb && len(x) >= 34 {
		qs, y := w[off:off+16], x[2:34]
		var sumi int32
		for j, q := range qs {
			sumi += int32(kv[q&0xf])*i8(y[j]) + int32(kv[q>>4])*i8(y[j+16])
		}
		s += half(x) * scale(w) * float32(sumi)
		w, x = w[bb:], x[34:]
	}
	return s
}

func dotIQ4NLGo(w, x []byte) float32 {
	return dotNibbleQ8_0(w, x, 18, 2, &kvaluesIQ4NL, half)
}

func dotMXFP4Go(w, x []byte) float32 {
	return dotNibbleQ8_0(w, x, 17, 1, &kvaluesFP4, func(b []byte) float32 { return e8m0Half(b[0]) })
}

func dotIQ4XSGo(w, x []byte) float32 {
	var s float32
	for len(w) >= 136 && len(x) >= 292 {
		dy, y := q8k((*[292]byte)(x))
		var bsum int32
		for g := 0; g < 8; g++ {
			qs, yy := w[8+16*g:8+16*g+16], y[32*g:32*g+32]
			var sumi int32
			for j, q := range qs {
				sumi += int32(kvaluesIQ4NL[q&0xf])*i8(yy[j]) + int32(kvaluesIQ4NL[q>>4])*i8(yy[j+16])
			}
			bsum += iq4xsScale(w, g) * sumi
		}
		s += half(w) * dy * float32(bsum)
		w, x = w[136:], x[292:]
	}
	return s
}

// gridQuant describes one grid i-quant: a 256-element block of 8 groups of 32 elements, each
// element x = d * unit * ls * q with d the block scale, ls the integer scale of the element's
// half-group (16 elements) and q a small signed integer taken from the grid.
type gridQuant struct {
	bytes int
	unit  float32
	scale func(b []byte) float32
	// group sets q to the 32 signed integers of group g and returns the scales of its halves.
	group func(b []byte, g int, q *[32]int8) [2]int32
}

// signs7 expands 7 stored sign bits to 8: the eighth makes the count of minus signs even
// (GGML's ksigns_iq2xs).
func signs7(s uint32) uint8 {
	s &= 127
	return uint8(s) | uint8(bits.OnesCount32(s)&1)<<7
}

// putSigned writes the n low bytes of grid entry v into q, negating element j where bit j of signs is set.
func putSigned(q []int8, v uint64, signs uint8, n int) {
	for j := 0; j < n; j++ {
		m := int8(v >> (8 * j))
		if signs>>j&1 != 0 {
			m = -m
		}
		q[j] = m
	}
}

func halfScale(b []byte) float32 { return half(b) }

var (
	// IQ2_XXS (256, 66): f16 d, then per group g 8 bytes: 4 grid indices (iq2xxsGrid, 8
	// magnitudes each), then a uint32 with four 7-bit sign fields (bits 7l..7l+6 for the
	// 8 elements of index l) and the 4-bit scale s in bits 28..31; ls = 2s+1, unit 1/8.
	iq2xxs = gridQuant{66, 0.125, halfScale, func(b []byte, g int, q *[32]int8) [2]int32 {
		p := b[2+8*g:]
		aux := binary.LittleEndian.Uint32(p[4:])
		for l := 0; l < 4; l++ {
			putSigned(q[8*l:], iq2xxsGrid[p[l]], signs7(aux>>(7*l)), 8)
		}
		ls := int32(2*(aux>>28) + 1)
		return [2]int32{ls, ls}
	}}
	// IQ2_XS (256, 74): f16 d, 32 uint16 (bits 0..8 index iq2xsGrid, bits 9..15 the 7 sign
	// bits; 4 per group), 8 scale bytes (low nibble: the group's first 16 elements, high nibble:
	// the second); ls = 2s+1, unit 1/8.
	iq2xs = gridQuant{74, 0.125, halfScale, func(b []byte, g int, q *[32]int8) [2]int32 {
		for l := 0; l < 4; l++ {
			v := binary.LittleEndian.Uint16(b[2+2*(4*g+l):])
			putSigned(q[8*l:], iq2xsGrid[v&511], signs7(uint32(v>>9)), 8)
		}
		sc := b[66+g]
		return [2]int32{2*int32(sc&0xf) + 1, 2*int32(sc>>4) + 1}
	}}
	// IQ2_S (256, 82): f16 d, 32 bytes of low index bits (4 per group), 32 sign bytes (all 8
	// signs stored), 8 qh bytes (bits 2l,2l+1 of qh[g] are index bits 8,9 of the group's
	// l-th index into iq2sGrid), 8 scale bytes as IQ2_XS; ls = 2s+1, unit 1/8.
	iq2s = gridQuant{82, 0.125, halfScale, func(b []byte, g int, q *[32]int8) [2]int32 {
		qh := uint32(b[66+g])
		for l := 0; l < 4; l++ {
			idx := uint32(b[2+4*g+l]) | (qh<<(8-2*l))&0x300
			putSigned(q[8*l:], iq2sGrid[idx], b[34+4*g+l], 8)
		}
		sc := b[74+g]
		return [2]int32{2*int32(sc&0xf) + 1, 2*int32(sc>>4) + 1}
	}}
	// IQ3_XXS (256, 98): f16 d, 64 index bytes into iq3xxsGrid (8 per group, 4 magnitudes
	// each), then per group a uint32 of four 7-bit sign fields (8 elements each) and the
	// scale s in bits 28..31; ls = 2s+1, unit 1/4.
	iq3xxs = gridQuant{98, 0.25, halfScale, func(b []byte, g int, q *[32]int8) [2]int32 {
		aux := binary.LittleEndian.Uint32(b[66+4*g:])
		for l := 0; l < 4; l++ {
			s := signs7(aux >> (7 * l))
			putSigned(q[8*l:], uint64(iq3xxsGrid[b[2+8*g+2*l]]), s, 4)
			putSigned(q[8*l+4:], uint64(iq3xxsGrid[b[2+8*g+2*l+1]]), s>>4, 4)
		}
		ls := int32(2*(aux>>28) + 1)
		return [2]int32{ls, ls}
	}}
	// IQ3_S (256, 110): f16 d, 64 low index bytes (8 per group), 8 qh bytes (bit k of qh[g]
	// is index bit 8 of the group's k-th index into iq3sGrid), 32 sign bytes (one per 8
	// elements), 4 scale bytes (nibble g, low first); ls = 2s+1, unit 1.
	iq3s = gridQuant{110, 1, halfScale, func(b []byte, g int, q *[32]int8) [2]int32 {
		qh := uint32(b[66+g])
		for k := 0; k < 8; k++ {
			idx := uint32(b[2+8*g+k]) | (qh>>k&1)<<8
			putSigned(q[4*k:], uint64(iq3sGrid[idx]), b[74+4*g+k/2]>>(4*(k%2)), 4)
		}
		ls := 2*int32(b[106+g/2]>>(4*(g%2))&0xf) + 1
		return [2]int32{ls, ls}
	}}
	// IQ1_S (256, 50): f16 d, 32 low index bytes (4 per group), 8 uint16 qh: bits 3l..3l+2
	// are index bits 8..10 of the group's l-th index into iq1sGrid (values -1, 0, 1), bits
	// 12..14 the scale s, bit 15 the sign of delta = ±1/8; x = d*(2s+1)*(grid+delta), here
	// q = 8*grid ± 1 with unit 1/8.
	iq1s = gridQuant{50, 0.125, halfScale, func(b []byte, g int, q *[32]int8) [2]int32 {
		h := uint32(binary.LittleEndian.Uint16(b[34+2*g:]))
		for l := 0; l < 4; l++ {
			putDelta(q[8*l:], iq1sGrid[uint32(b[2+4*g+l])|(h>>(3*l)&7)<<8], h&0x8000 != 0)
		}
		ls := 2*int32(h>>12&7) + 1
		return [2]int32{ls, ls}
	}}
	// IQ1_M (256, 56): 32 low index bytes, 16 qh bytes (two per group: each nibble holds
	// index bits 8..10 of one index in bits 0..2 and delta's sign in bit 3), 8 scale bytes read
	// as 4 uint16: bits 6(g%2)..+2 and +3..+5 of word g/2 are the 3-bit scales of group g's
	// halves, and the top nibbles of the 4 words, first word lowest, are the f16 block scale d.
	iq1m = gridQuant{56, 0.125, iq1mScale, func(b []byte, g int, q *[32]int8) [2]int32 {
		for l := 0; l < 4; l++ {
			nib := uint32(b[32+2*g+l/2]) >> (4 * (l % 2)) & 0xf
			putDelta(q[8*l:], iq1sGrid[uint32(b[4*g+l])|(nib&7)<<8], nib&8 != 0)
		}
		w := uint32(binary.LittleEndian.Uint16(b[48+2*(g/2):])) >> (6 * (g % 2))
		return [2]int32{2*int32(w&7) + 1, 2*int32(w>>3&7) + 1}
	}}
)

func iq1mScale(b []byte) float32 {
	var u uint16
	for i := 0; i < 4; i++ {
		u |= binary.LittleEndian.Uint16(b[48+2*i:]) >> 12 << (4 * i)
	}
	return f16Table[u]
}

// putDelta writes 8*v ± 1 for the 8 int8 values of iq1sGrid entry v (minus when neg).
func putDelta(q []int8, v uint64, neg bool) {
	d := int8(1)
	if neg {
		d = -1
	}
	for j := 0; j < 8; j++ {
		q[j] = 8*int8(v>>(8*j)) + d
	}
}

func (gq *gridQuant) dequant(b []byte, y []float32) {
	d := gq.scale(b)
	var q [32]int8
	for g := 0; g < 8; g++ {
		ls := gq.group(b, g, &q)
		for h := 0; h < 2; h++ {
			db := d * (float32(ls[h]) * gq.unit)
			for j, v := range q[16*h : 16*h+16] {
				y[32*g+16*h+j] = db * float32(v)
			}
		}
	}
}

// dot multiplies grid-quant weights with Q8_K activations: integer sums per half-group times
// the integer scales, one float multiply per block, as llama.cpp's CPU backend does.
func (gq *gridQuant) dot(w, x []byte) float32 {
	var s float32
	var q [32]int8
	for len(w) >= gq.bytes && len(x) >= 292 {
		dy, y := q8k((*[292]byte)(x))
		var bsum int32
		for g := 0; g < 8; g++ {
			ls := gq.group(w, g, &q)
			yy := y[32*g : 32*g+32]
			var s0, s1 int32
			for j := 0; j < 16; j++ {
				s0 += int32(q[j]) * i8(yy[j])
				s1 += int32(q[j+16]) * i8(yy[j+16])
			}
			bsum += s0*ls[0] + s1*ls[1]
		}
		s += gq.scale(w) * dy * float32(bsum)
		w, x = w[gq.bytes:], x[292:]
	}
	return gq.unit * s
}

// gridQuantOf returns the description of a grid i-quant, or nil for any other type.
func gridQuantOf(t Type) *gridQuant {
	switch t {
	case IQ2_XXS:
		return &iq2xxs
	case IQ2_XS:
		return &iq2xs
	case IQ2_S:
		return &iq2s
	case IQ3_XXS:
		return &iq3xxs
	case IQ3_S:
		return &iq3s
	case IQ1_S:
		return &iq1s
	case IQ1_M:
		return &iq1m
	}
	return nil
}

// nearestCode returns the code whose kv value is closest to v.
func nearestCode(kv *[16]int8, v float32) int {
	best, bd := 0, float32(math.Inf(1))
	for c, k := range kv {
		if d := abs32(v - float32(k)); d < bd {
			best, bd = c, d
		}
	}
	return best
}

// putNibbles stores the nearest codes of x/d (d != 0) as IQ4_NL orders them.
func putNibbles(kv *[16]int8, x []float32, d float32, qs []byte) {
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for j := 0; j < 16; j++ {
		qs[j] = byte(nearestCode(kv, x[j]*id)) | byte(nearestCode(kv, x[j+16]*id))<<4
	}
}

// quantIQ4NL: d = the element of largest magnitude / -127, so that it maps onto the codebook's -127.
func quantIQ4NL(x []float32, b []byte) {
	signed, _ := absMax(x)
	d := putHalf(b, signed/-127)
	putNibbles(&kvaluesIQ4NL, x, d, b[2:18])
}

// quantMXFP4: the smallest exponent that brings the largest magnitude within E2M1's 6, then
// nearest E2M1 values.
func quantMXFP4(x []float32, b []byte) {
	_, amax := absMax(x)
	e := 0
	if amax > 0 {
		e = min(254, max(0, int(math.Ceil(math.Log2(float64(amax)/6)))+127))
	}
	b[0] = byte(e)
	putNibbles(&kvaluesFP4, x, e8m0Half(byte(e)), b[1:17])
}

// quantIQ4XS: each 32-element sub-block's own IQ4_NL scale, then a block d that expresses
// those scales as the 6-bit ls-32 in [-32, 31].
func quantIQ4XS(x []float32, b []byte) {
	clear(b[:136])
	var sub [8]float32
	var smax float32
	for g := range sub {
		signed, _ := absMax(x[32*g : 32*g+32])
		sub[g] = signed / -127
		smax = max(smax, abs32(sub[g]))
	}
	d := putHalf(b, smax/31)
	var h uint16
	for g, s := range sub {
		ls := int32(32)
		if d != 0 {
			ls = min(63, max(0, nearestInt(s/d)+32))
		}
		b[4+g/2] |= byte(ls&0xf) << (4 * (g % 2))
		h |= uint16(ls>>4) << (2 * g)
		putNibbles(&kvaluesIQ4NL, x[32*g:], d*float32(ls-32), b[8+16*g:])
	}
	binary.LittleEndian.PutUint16(b[2:], h)
}
