package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

// Each case builds one block bit by bit from the published layout, described per element
// (which byte, which bits), with exactly representable scales, and states the value every
// element must dequantize to.
type blockCase struct {
	typ   Type
	block []byte
	want  []float32
}

func qpat(e, mod, mul, add int) int { return (e*mul + add) % mod }

func setNibble(b []byte, i int, high bool, v int) {
	if high {
		b[i] |= byte(v&0xf) << 4
	} else {
		b[i] |= byte(v & 0xf)
	}
}

func handBuiltBlocks() []blockCase {
	var cases []blockCase
	{ // Q4_0: d=0.5, x = (q-8)*d
		b := make([]byte, 18)
		put16(b, f16(0.5))
		want := make([]float32, 32)
		for e := 0; e < 32; e++ {
			q := qpat(e, 16, 5, 3)
			setNibble(b[2:], e%16, e >= 16, q)
			want[e] = float32(q-8) * 0.5
		}
		cases = append(cases, blockCase{Q4_0, b, want})
	}
	{ // Q4_1: d=0.25, m=-1.5, x = q*d + m
		b := make([]byte, 20)
		put16(b, f16(0.25))
		put16(b[2:], f16(-1.5))
		want := make([]float32, 32)
		for e := 0; e < 32; e++ {
			q := qpat(e, 16, 7, 1)
			setNibble(b[4:], e%16, e >= 16, q)
			want[e] = float32(q)*0.25 - 1.5
		}
		cases = append(cases, blockCase{Q4_1, b, want})
	}
	{ // Q5_0: d=0.125, bit 4 of element e is bit e of qh; x = (q-16)*d
		b := make([]byte, 22)
		put16(b, f16(0.125))
		var qh uint32
		want := make([]float32, 32)
		for e := 0; e < 32; e++ {
			q := qpat(e, 32, 11, 5)
			setNibble(b[6:], e%16, e >= 16, q)
			qh |= uint32(q>>4) << e
			want[e] = float32(q-16) * 0.125
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
		cases = append(cases, blockCase{Q5_0, b, want})
	}
	{ // Q5_1: d=0.5, m=2, x = q*d + m
		b := make([]byte, 24)
		put16(b, f16(0.5))
		put16(b[2:], f16(2))
		var qh uint32
		want := make([]float32, 32)
		for e := 0; e < 32; e++ {
			q := qpat(e, 32, 13, 2)
			setNibble(b[8:], e%16, e >= 16, q)
			qh |= uint32(q>>4) << e
			want[e] = float32(q)*0.5 + 2
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
		cases = append(cases, blockCase{Q5_1, b, want})
	}
	{ // Q8_0: d=0.125, int8 quants
		b := make([]byte, 34)
		put16(b, f16(0.125))
		want := make([]float32, 32)
		for e := 0; e < 32; e++ {
			q := qpat(e, 256, 37, 11) - 128
			b[2+e] = byte(int8(q))
			want[e] = float32(q) * 0.125
		}
		cases = append(cases, blockCase{Q8_0, b, want})
	}
	{ // Q8_K: f32 d=0.25
		b := make([]byte, 292)
		binary.LittleEndian.PutUint32(b, math.Float32bits(0.25))
		want := make([]float32, 256)
		for e := 0; e < 256; e++ {
			q := qpat(e, 255, 29, 3) - 127
			b[4+e] = byte(int8(q))
			want[e] = float32(q) * 0.25
		}
		cases = append(cases, blockCase{Q8_K, b, want})
	}
	{ // Q2_K: element e: scale/min byte e/16 (low/high nibble); quant in byte 16 + 32*(e/128) + e%32,
		// bits 2*((e%128)/32); d=0.5, dmin=0.25; x = d*sc*q - dmin*m.
		b := make([]byte, 84)
		put16(b[80:], f16(0.5))
		put16(b[82:], f16(0.25))
		for j := 0; j < 16; j++ {
			b[j] = byte(qpat(j, 16, 3, 1)) | byte(qpat(j, 16, 5, 2))<<4
		}
		want := make([]float32, 256)
		for e := 0; e < 256; e++ {
			q := qpat(e, 4, 3, e/7)
			b[16+32*(e/128)+e%32] |= byte(q) << (2 * ((e % 128) / 32))
			sc, m := qpat(e/16, 16, 3, 1), qpat(e/16, 16, 5, 2)
			want[e] = 0.5*float32(sc)*float32(q) - 0.25*float32(m)
		}
		cases = append(cases, blockCase{Q2_K, b, want})
	}
	{ // Q3_K: low 2 bits as in Q2_K (at byte 32+...), high bit in hmask[e%32] bit 4*(e/128)+(e%128)/32
		// (set: +0, clear: -4); 6-bit scales (value+32): low nibble in byte 96+j%8 (high nibble for j>=8),
		// top 2 bits in byte 104+j%4 at bit 2*(j/4); d=0.25; x = d*(sc-32)*q.
		b := make([]byte, 110)
		put16(b[108:], f16(0.25))
		for j := 0; j < 16; j++ {
			v := qpat(j, 64, 23, 9)
			setNibble(b[96:], j%8, j >= 8, v&0xf)
			b[104+j%4] |= byte(v>>4) << (2 * (j / 4))
		}
		want := make([]float32, 256)
		for e := 0; e < 256; e++ {
			q := qpat(e, 8, 5, e/9) // 0..7, value q-4
			b[32+32*(e/128)+e%32] |= byte(q&3) << (2 * ((e % 128) / 32))
			if q >= 4 {
				b[e%32] |= 1 << (4*(e/128) + (e%128)/32)
			}
			sc := qpat(e/16, 64, 23, 9) - 32
			want[e] = 0.25 * float32(sc) * float32(q-4)
		}
		cases = append(cases, blockCase{Q3_K, b, want})
	}
	// Q4_K/Q5_K scales: sub-block j<4: scale = low 6 bits of byte j, min = low 6 bits of byte j+4;
	// j>=4: scale = low nibble of byte j+4 | (top 2 bits of byte j-4)<<4, min = high nibble of
	// byte j+4 | (top 2 bits of byte j)<<4 (bytes counted from the start of the 12-byte array).
	packK4 := func(s []byte, sc, m [8]int) {
		for j := 0; j < 8; j++ {
			if j < 4 {
				s[j] |= byte(sc[j] & 63)
				s[j+4] |= byte(m[j] & 63)
			} else {
				s[j+4] |= byte(sc[j]&0xf) | byte(m[j]&0xf)<<4
				s[j-4] |= byte(sc[j]>>4) << 6
				s[j] |= byte(m[j]>>4) << 6
			}
		}
	}
	var sc8, m8 [8]int
	for j := range sc8 {
		sc8[j] = qpat(j, 64, 27, 13)
		m8[j] = qpat(j, 64, 41, 7)
	}
	{ // Q4_K: element e: sub-block e/32; nibble of byte 16 + 32*(e/64) + e%32, high when e%64 >= 32;
		// d=0.125, dmin=0.0625; x = d*sc*q - dmin*m.
		b := make([]byte, 144)
		put16(b, f16(0.125))
		put16(b[2:], f16(0.0625))
		packK4(b[4:16], sc8, m8)
		want := make([]float32, 256)
		for e := 0; e < 256; e++ {
			q := qpat(e, 16, 7, e/13)
			setNibble(b[16:], 32*(e/64)+e%32, e%64 >= 32, q)
			want[e] = 0.125*float32(sc8[e/32])*float32(q) - 0.0625*float32(m8[e/32])
		}
		cases = append(cases, blockCase{Q4_K, b, want})
	}
	{ // Q5_K: as Q4_K with nibbles at byte 48+..., fifth bit in qh[e%32] bit e/32.
		b := make([]byte, 176)
		put16(b, f16(0.25))
		put16(b[2:], f16(0.125))
		packK4(b[4:16], sc8, m8)
		want := make([]float32, 256)
		for e := 0; e < 256; e++ {
			q := qpat(e, 32, 11, e/5)
			setNibble(b[48:], 32*(e/64)+e%32, e%64 >= 32, q)
			b[16+e%32] |= byte(q>>4) << (e / 32)
			want[e] = 0.25*float32(sc8[e/32])*float32(q) - 0.125*float32(m8[e/32])
		}
		cases = append(cases, blockCase{Q5_K, b, want})
	}
	{ // Q6_K: element e, h=e/128, r=e%128: low 4 bits in ql byte 64h + r%64 (high nibble when
		// r >= 64), top 2 bits in qh byte 128 + 32h + r%32 at bits 2*(r/32); int8 scale e/16 at
		// byte 192+e/16; d=0.5; x = d*sc*(q-32).
		b := make([]byte, 210)
		put16(b[208:], f16(0.5))
		for g := 0; g < 16; g++ {
			b[192+g] = byte(int8(qpat(g, 256, 45, 17) - 128))
		}
		want := make([]float32, 256)
		for e := 0; e < 256; e++ {
			h, r := e/128, e%128
			q := qpat(e, 64, 19, e/11)
			setNibble(b, 64*h+r%64, r >= 64, q)
			b[128+32*h+r%32] |= byte(q>>4) << (2 * (r / 32))
			sc := qpat(e/16, 256, 45, 17) - 128
			want[e] = 0.5 * float32(sc) * float32(q-32)
		}
		cases = append(cases, blockCase{Q6_K, b, want})
	}
	return cases
}

func TestDequantizeHandBuiltBlocks(t *testing.T) {
	for _, tc := range handBuiltBlocks() {
		t.Run(tc.typ.String(), func(t *testing.T) {
			// Two copies of the block: the second checks the block stride.
			src := append(append([]byte{}, tc.block...), tc.block...)
			got := make([]float32, 2*len(tc.want))
			if err := Dequantize(tc.typ, src, got); err != nil {
				t.Fatal(err)
			}
			for i, w := range append(append([]float32{}, tc.want...), tc.want...) {
				if got[i] != w {
					t.Fatalf("element %d = %g, want %g", i, got[i], w)
				}
			}
		})
	}
}

// TestQ3ScalesMatchMaskDecoding checks the Q3_K scale unpacking against the 32-bit mask
// formulation of the same layout on every byte pattern position.
func TestQ3ScalesMatchMaskDecoding(t *testing.T) {
	for seed := 0; seed < 200; seed++ {
		var s [12]byte
		for i := range s {
			s[i] = byte(seed*31 + i*97 + seed*i*13)
		}
		var aux [4]uint32
		aux[0] = binary.LittleEndian.Uint32(s[0:])
		aux[1] = binary.LittleEndian.Uint32(s[4:])
		tmp := binary.LittleEndian.Uint32(s[8:])
		const m1, m2 = 0x03030303, 0x0f0f0f0f
		aux[2] = (aux[0]>>4)&m2 | ((tmp>>4)&m1)<<4
		aux[3] = (aux[1]>>4)&m2 | ((tmp>>6)&m1)<<4
		aux[0] = aux[0]&m2 | ((tmp>>0)&m1)<<4
		aux[1] = aux[1]&m2 | ((tmp>>2)&m1)<<4
		var got [16]int8
		q3Scales(s[:], &got)
		for j := 0; j < 16; j++ {
			want := int8(byte(aux[j/4]>>(8*(j%4)))) - 32
			if got[j] != want {
				t.Fatalf("seed %d scale %d = %d, want %d", seed, j, got[j], want)
			}
		}
	}
}

func TestDequantizeRejectsBadSizes(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		src  int
		dst  int
	}{
		{"short source", Q4_0, 17, 32},
		{"short K source", Q6_K, 209, 256},
		{"partial block", Q4_K, 144, 200},
		{"short F32", F32, 7, 2},
		{"unknown type", Type(99), 64, 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := Dequantize(tc.typ, make([]byte, tc.src), make([]float32, tc.dst)); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}
