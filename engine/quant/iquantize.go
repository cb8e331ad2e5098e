package quant

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// gridCoder is the reference quantizer of a grid i-quant: per scale unit (16 or 32 elements)
// the scale that brings the unit's largest magnitude onto the grid's largest, then per chunk
// of 8 (or 4) elements the nearest grid entry to the magnitudes, by exhaustive search, with the
// elements' signs. Where only 7 sign bits are stored (their eighth is the parity), a group
// with an odd count of negatives flips the sign of its smallest element. Like the other
// quantizers here it is simple, not error-minimising: it exists to build test models.
type gridCoder struct {
	gq      *gridQuant
	chunk   int
	n       int
	entry   func(i int) uint64
	maxMag  float32
	perHalf bool // a scale per 16 elements (else per 32)
	parity  bool
	// pack writes the block from d, the 4-bit scales (s[2g], and s[2g+1] where perHalf),
	// the grid index of each chunk and the sign bits of each 8 elements.
	pack func(b []byte, s *[16]uint32, idx *[64]int, signs *[32]uint8)
}

func (c *gridCoder) quantize(x []float32, b []byte) {
	clear(b[:c.gq.bytes])
	unitLen := 32
	if c.perHalf {
		unitLen = 16
	}
	var dbu [16]float32
	var dmax float32
	for u := 0; u < 256/unitLen; u++ {
		_, amax := absMax(x[u*unitLen : (u+1)*unitLen])
		dbu[u] = amax / c.maxMag
		dmax = max(dmax, dbu[u])
	}
	d := putHalf(b, dmax/(31*c.gq.unit))
	if d == 0 {
		return
	}
	var s [16]uint32
	var idx [64]int
	var signs [32]uint8
	for u := 0; u < 256/unitLen; u++ {
		su := uint32(min(15, max(0, nearestInt((dbu[u]/(d*c.gq.unit)-1)/2))))
		db := d * c.gq.unit * float32(2*su+1)
		if c.perHalf {
			s[u] = su
		} else {
			s[2*u] = su
		}
		for k := u * unitLen / c.chunk; k < (u+1)*unitLen/c.chunk; k++ {
			idx[k] = c.nearest(x[k*c.chunk:(k+1)*c.chunk], db)
		}
	}
	for j := range signs {
		g := x[8*j : 8*j+8]
		smallest := 0
		for i, v := range g {
			if v < 0 {
				signs[j] |= 1 << i
			}
			if abs32(v) < abs32(g[smallest]) {
				smallest = i
			}
		}
		if c.parity && bits.OnesCount8(signs[j])%2 == 1 {
			signs[j] ^= 1 << smallest
		}
	}
	c.pack(b, &s, &idx, &signs)
}

// nearest returns the grid entry closest to |x|/db.
func (c *gridCoder) nearest(x []float32, db float32) int {
	var a [8]float32
	for j, v := range x {
		a[j] = abs32(v) / db
	}
	best, bd := 0, float32(math.Inf(1))
	for i := 0; i < c.n; i++ {
		e := c.entry(i)
		var dist float32
		for j := 0; j < c.chunk; j++ {
			t := a[j] - float32(uint8(e>>(8*j)))
			dist += t * t
		}
		if dist < bd {
			best, bd = i, dist
		}
	}
	return best
}

var (
	iq2xxsCoder = gridCoder{&iq2xxs, 8, 256, func(i int) uint64 { return iq2xxsGrid[i] }, 43, false, true,
		func(b []byte, s *[16]uint32, idx *[64]int, signs *[32]uint8) {
			for g := 0; g < 8; g++ {
				aux := s[2*g] << 28
				for l := 0; l < 4; l++ {
					b[2+8*g+l] = byte(idx[4*g+l])
					aux |= uint32(signs[4*g+l]&127) << (7 * l)
				}
				binary.LittleEndian.PutUint32(b[2+8*g+4:], aux)
			}
		}}
	iq2xsCoder = gridCoder{&iq2xs, 8, 512, func(i int) uint64 { return iq2xsGrid[i] }, 43, true, true,
		func(b []byte, s *[16]uint32, idx *[64]int, signs *[32]uint8) {
			for k := 0; k < 32; k++ {
				binary.LittleEndian.PutUint16(b[2+2*k:], uint16(idx[k])|uint16(signs[k]&127)<<9)
			}
			for g := 0; g < 8; g++ {
				b[66+g] = byte(s[2*g] | s[2*g+1]<<4)
			}
		}}
	iq2sCoder = gridCoder{&iq2s, 8, 1024, func(i int) uint64 { return iq2sGrid[i] }, 43, true, false,
		func(b []byte, s *[16]uint32, idx *[64]int, signs *[32]uint8) {
			for k := 0; k < 32; k++ {
				b[2+k] = byte(idx[k])
				b[66+k/4] |= byte(idx[k]>>8) << (2 * (k % 4))
				b[34+k] = signs[k]
			}
			for g := 0; g < 8; g++ {
				b[74+g] = byte(s[2*g] | s[2*g+1]<<4)
			}
		}}
	iq3xxsCoder = gridCoder{&iq3xxs, 4, 256, func(i int) uint64 { return uint64(iq3xxsGrid[i]) }, 62, false, true,
		func(b []byte, s *[16]uint32, idx *[64]int, signs *[32]uint8) {
			for g := 0; g < 8; g++ {
				aux := s[2*g] << 28
				for m := 0; m < 8; m++ {
					b[2+8*g+m] = byte(idx[8*g+m])
				}
				for l := 0; l < 4; l++ {
					aux |= uint32(signs[4*g+l]&127) << (7 * l)
				}
				binary.LittleEndian.PutUint32(b[66+4*g:], aux)
			}
		}}
	iq3sCoder = gridCoder{&iq3s, 4, 512, func(i int) uint64 { return uint64(iq3sGrid[i]) }, 15, false, false,
		func(b []byte, s *[16]uint32, idx *[64]int, signs *[32]uint8) {
			for g := 0; g < 8; g++ {
				for k := 0; k < 8; k++ {
					b[2+8*g+k] = byte(idx[8*g+k])
					b[66+g] |= byte(idx[8*g+k]>>8) << k
				}
				b[106+g/2] |= byte(s[2*g]) << (4 * (g % 2))
			}
			copy(b[74:106], signs[:])
		}}
)

// gridCoderOf returns the quantizer of a grid i-quant, or nil (IQ1_S and IQ1_M have none).
func gridCoderOf(t Type) *gridCoder {
	switch t {
	case IQ2_XXS:
		return &iq2xxsCoder
	case IQ2_XS:
		return &iq2xsCoder
	case IQ2_S:
		return &iq2sCoder
	case IQ3_XXS:
		return &iq3xxsCoder
	case IQ3_S:
		return &iq3sCoder
	}
	return nil
}
