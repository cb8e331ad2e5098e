package quant

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// fnv64 is FNV-1a over bytes.
func fnv64(b []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range b {
		h ^= uint64(c)
		h *= 0x100000001b3
	}
	return h
}

func leBytes64(v []uint64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

func leBytes32(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// The checksums were computed when these tests were written, independently of the Go tables,
// by a Python script over ggml/src/ggml-common.h of the ngxson/llama.cpp mirror: for each
// GGML_TABLE_BEGIN(type, name, n) block, parse its n numbers and take FNV-1a 64 over their
// little-endian bytes (8 per uint64_t, 4 per uint32_t, 1 per uint8_t/int8_t in two's complement).
func TestCodebooksMatchPublishedChecksums(t *testing.T) {
	var ksigns [128]byte
	for i := range ksigns {
		ksigns[i] = signs7(uint32(i))
	}
	var iq4nl, fp4 [16]byte
	for i := range iq4nl {
		iq4nl[i], fp4[i] = byte(kvaluesIQ4NL[i]), byte(kvaluesFP4[i])
	}
	tests := []struct {
		name string
		b    []byte
		want uint64
	}{
		{"iq2xxs_grid", leBytes64(iq2xxsGrid[:]), 0xbb4ee025b5ac6e8e},
		{"iq2xs_grid", leBytes64(iq2xsGrid[:]), 0xc9b1ee61e79909bd},
		{"iq2s_grid", leBytes64(iq2sGrid[:]), 0x123edd38a3b62b90},
		{"iq3xxs_grid", leBytes32(iq3xxsGrid[:]), 0xdfa5dc83d6a155d5},
		{"iq3s_grid", leBytes32(iq3sGrid[:]), 0xfa37020c25b44829},
		{"iq1s_grid", leBytes64(iq1sGrid[:]), 0x6703ed863501ae2e},
		{"ksigns_iq2xs (computed by signs7)", ksigns[:], 0xf19ba8f8c3292ba5},
		{"kvalues_iq4nl", iq4nl[:], 0x055d06d2d8fa0f75},
		{"kvalues_fp4", fp4[:], 0x3f0e3c08af1e5eb5},
	}
	for _, tc := range tests {
		if got := fnv64(tc.b); got != tc.want {
			t.Errorf("%s: FNV-1a %#016x, published table gives %#016x", tc.name, got, tc.want)
		}
	}
}

// e2m1 decodes an OCP MXFP4 element from its bits: sign, 2 exponent bits (bias 1), 1 mantissa bit.
func e2m1(c int) float64 {
	e, m := c>>1&3, float64(c&1)
	v := m * 0.5 // subnormal
	if e != 0 {
		v = (1 + m/2) * math.Ldexp(1, e-1)
	}
	if c&8 != 0 {
		v = -v
	}
	return v
}

// gridByte returns byte j of a grid entry: the magnitude (or int8 value) of element j.
func gridByte(v uint64, j int) int { return int(v >> (8 * j) & 0xff) }

// pick gives the k-th index of a pattern over n codebook entries: the first and the last
// entry, then a spread of others.
func pick(k, n int) int {
	switch k % 7 {
	case 0:
		return 0
	case 1:
		return n - 1
	}
	return (k*97 + 13) % n
}

// signField gives the k-th 7-bit sign field: none, all seven, then a spread.
func signField(k int) uint32 {
	switch k % 5 {
	case 0:
		return 0
	case 1:
		return 127
	}
	return uint32(k*37+5) % 128
}

// sgn8 is the sign of element j under a 7-bit field whose eighth bit makes the minus count even.
func sgn8(field uint32, j int) float64 {
	if j == 7 {
		if bits.OnesCount32(field)%2 == 1 {
			return -1
		}
		return 1
	}
	if field>>j&1 != 0 {
		return -1
	}
	return 1
}

func sgnBit(b byte, j int) float64 {
	if b>>j&1 != 0 {
		return -1
	}
	return 1
}

// iquantBlocks builds blocks of each new type field by field from the published layout and
// states, from the format's formula, what every element must dequantize to.
func iquantBlocks() []blockCase {
	var cases []blockCase
	add := func(typ Type, b []byte, want []float64) {
		w := make([]float32, len(want))
		for i, v := range want {
			w[i] = float32(v)
		}
		cases = append(cases, blockCase{typ, b, w})
	}
	kv := []float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	{ // IQ4_NL: d=0.5, x = d*kv[q]; codes cover all 16.
		b := make([]byte, 18)
		put16(b, f16(0.5))
		want := make([]float64, 32)
		for e := 0; e < 32; e++ {
			q := qpat(e, 16, 5, 3)
			setNibble(b[2:], e%16, e >= 16, q)
			want[e] = 0.5 * kv[q]
		}
		add(IQ4_NL, b, want)
	}
	for _, ex := range []int{0, 1, 120, 127, 130} { // MXFP4: x = 2^(e-127) * E2M1(q)
		b := make([]byte, 17)
		b[0] = byte(ex)
		want := make([]float64, 32)
		for e := 0; e < 32; e++ {
			q := qpat(e, 16, 7, ex)
			setNibble(b[1:], e%16, e >= 16, q)
			want[e] = math.Ldexp(1, ex-127) * e2m1(q)
		}
		add(MXFP4, b, want)
	}
	{ // IQ4_XS: d=0.25, 6-bit scales ls (low nibble in scales_l, high 2 bits in scales_h); x = d*(ls-32)*kv[q]
		b := make([]byte, 136)
		put16(b, f16(0.25))
		ls := []int{0, 63, 32, 33, 31, 17, 48, 5}
		var h uint16
		for g, s := range ls {
			b[4+g/2] |= byte(s&0xf) << (4 * (g % 2))
			h |= uint16(s>>4) << (2 * g)
		}
		binary.LittleEndian.PutUint16(b[2:], h)
		want := make([]float64, 256)
		for e := 0; e < 256; e++ {
			g, j := e/32, e%32
			q := qpat(e, 16, 3, g)
			setNibble(b[8+16*g:], j%16, j >= 16, q)
			want[e] = 0.25 * float64(ls[g]-32) * kv[q]
		}
		add(IQ4_XS, b, want)
	}
	scales := []int{0, 15, 7, 1, 14, 8, 3, 12}
	{ // IQ2_XXS: d=0.5; per group 4 index bytes, then a uint32: sign fields of 7 bits, scale in bits 28..31.
		// x = d*(0.5+s)/4 * grid[idx][j] * sign
		b := make([]byte, 66)
		put16(b, f16(0.5))
		want := make([]float64, 256)
		for g := 0; g < 8; g++ {
			aux := uint32(scales[g]) << 28
			for l := 0; l < 4; l++ {
				k := 4*g + l
				idx := pick(k, 256)
				b[2+8*g+l] = byte(idx)
				sf := signField(k)
				aux |= sf << (7 * l)
				for j := 0; j < 8; j++ {
					want[32*g+8*l+j] = 0.5 * (0.5 + float64(scales[g])) / 4 * float64(gridByte(iq2xxsGrid[idx], j)) * sgn8(sf, j)
				}
			}
			binary.LittleEndian.PutUint32(b[2+8*g+4:], aux)
		}
		add(IQ2_XXS, b, want)
	}
	{ // IQ2_XS: d=0.25; uint16 = 9-bit index | 7 sign bits << 9; scale byte per group, nibble per 16.
		b := make([]byte, 74)
		put16(b, f16(0.25))
		want := make([]float64, 256)
		for g := 0; g < 8; g++ {
			s0, s1 := scales[g], scales[7-g]
			b[66+g] = byte(s0 | s1<<4)
			for l := 0; l < 4; l++ {
				k := 4*g + l
				idx, sf := pick(k, 512), signField(k+1)
				binary.LittleEndian.PutUint16(b[2+2*k:], uint16(idx)|uint16(sf)<<9)
				s := s0
				if l >= 2 {
					s = s1
				}
				for j := 0; j < 8; j++ {
					want[8*k+j] = 0.25 * (0.5 + float64(s)) / 4 * float64(gridByte(iq2xsGrid[idx], j)) * sgn8(sf, j)
				}
			}
		}
		add(IQ2_XS, b, want)
	}
	{ // IQ2_S: d=2; 10-bit index = qs byte | 2 bits of qh[g] at 2l; 8 explicit sign bits per 8; scales as IQ2_XS.
		b := make([]byte, 82)
		put16(b, f16(2))
		want := make([]float64, 256)
		for g := 0; g < 8; g++ {
			s0, s1 := scales[(g+3)%8], scales[g]
			b[74+g] = byte(s0 | s1<<4)
			for l := 0; l < 4; l++ {
				k := 4*g + l
				idx := pick(k, 1024)
				sb := byte(k*53 + 1)
				if k == 1 {
					sb = 0xff
				}
				b[2+k] = byte(idx)
				b[66+g] |= byte(idx>>8) << (2 * l)
				b[34+k] = sb
				s := s0
				if l >= 2 {
					s = s1
				}
				for j := 0; j < 8; j++ {
					want[8*k+j] = 2 * (0.5 + float64(s)) / 4 * float64(gridByte(iq2sGrid[idx], j)) * sgnBit(sb, j)
				}
			}
		}
		add(IQ2_S, b, want)
	}
	{ // IQ3_XXS: d=0.5; 64 index bytes (one per 4 elements), then per group a uint32 of 4 sign fields and the scale.
		// x = d*(0.5+s)/2 * grid[idx][j] * sign
		b := make([]byte, 98)
		put16(b, f16(0.5))
		want := make([]float64, 256)
		for g := 0; g < 8; g++ {
			aux := uint32(scales[g]) << 28
			for l := 0; l < 4; l++ {
				k := 4*g + l
				sf := signField(k + 2)
				aux |= sf << (7 * l)
				for h := 0; h < 2; h++ {
					idx := pick(2*k+h, 256)
					b[2+2*k+h] = byte(idx)
					for j := 0; j < 4; j++ {
						want[8*k+4*h+j] = 0.5 * (0.5 + float64(scales[g])) / 2 * float64(gridByte(uint64(iq3xxsGrid[idx]), j)) * sgn8(sf, 4*h+j)
					}
				}
			}
			binary.LittleEndian.PutUint32(b[66+4*g:], aux)
		}
		add(IQ3_XXS, b, want)
	}
	{ // IQ3_S: d=0.25; 9-bit index per 4 elements (bit 8 in qh[g] bit k); a sign byte per 8; 4-bit scale per 32.
		// x = d*(1+2s) * grid[idx][j] * sign
		b := make([]byte, 110)
		put16(b, f16(0.25))
		want := make([]float64, 256)
		for g := 0; g < 8; g++ {
			s := scales[(g+5)%8]
			b[106+g/2] |= byte(s) << (4 * (g % 2))
			for k := 0; k < 8; k++ {
				n := 8*g + k
				idx := pick(n, 512)
				b[2+n] = byte(idx)
				b[66+g] |= byte(idx>>8) << k
				for j := 0; j < 4; j++ {
					e := 32*g + 4*k + j
					if j == 0 && k%2 == 0 {
						b[74+e/8] = byte(e*29 + 7)
					}
					want[e] = 0.25 * float64(1+2*s) * float64(gridByte(uint64(iq3sGrid[idx]), j)) * sgnBit(b[74+e/8], e%8)
				}
			}
		}
		add(IQ3_S, b, want)
	}
	{ // IQ1_S: d=0.5; 11-bit index per 8 (low byte in qs, high 3 bits in qh[g] at 3l); qh bits 12..14 the
		// scale, bit 15 the sign of delta; x = d*(2s+1)*(grid int8 + delta), delta = ±0.125
		b := make([]byte, 50)
		put16(b, f16(0.5))
		want := make([]float64, 256)
		for g := 0; g < 8; g++ {
			s := scales[g] & 7
			neg := g%2 == 1
			h := uint16(s) << 12
			delta := 0.125
			if neg {
				h |= 0x8000
				delta = -0.125
			}
			for l := 0; l < 4; l++ {
				k := 4*g + l
				idx := pick(k, 2048)
				b[2+k] = byte(idx)
				h |= uint16(idx>>8) << (3 * l)
				for j := 0; j < 8; j++ {
					want[8*k+j] = 0.5 * float64(2*s+1) * (float64(int8(gridByte(iq1sGrid[idx], j))) + delta)
				}
			}
			binary.LittleEndian.PutUint16(b[34+2*g:], h)
		}
		add(IQ1_S, b, want)
	}
	{ // IQ1_M: 11-bit index per 8 (qs byte | bits 0..2 of a qh nibble), nibble bit 3 the sign of delta; 3-bit
		// scales per 16 in 4 uint16 words (bits 6(g%2)..), the f16 d in the words' top nibbles.
		b := make([]byte, 56)
		d := f16(0.75)
		var words [4]uint16
		for i := range words {
			words[i] = (d >> (4 * i) & 0xf) << 12
		}
		want := make([]float64, 256)
		for g := 0; g < 8; g++ {
			s0, s1 := scales[g]&7, scales[7-g]&7
			words[g/2] |= uint16(s0|s1<<3) << (6 * (g % 2))
			for l := 0; l < 4; l++ {
				k := 4*g + l
				idx := pick(k, 2048)
				neg := (k*5)%3 == 0
				nib := byte(idx >> 8)
				delta := 0.125
				if neg {
					nib |= 8
					delta = -0.125
				}
				b[k] = byte(idx)
				b[32+2*g+l/2] |= nib << (4 * (l % 2))
				s := s0
				if l >= 2 {
					s = s1
				}
				for j := 0; j < 8; j++ {
					want[8*k+j] = 0.75 * float64(2*s+1) * (float64(int8(gridByte(iq1sGrid[idx], j))) + delta)
				}
			}
		}
		for i, w := range words {
			binary.LittleEndian.PutUint16(b[48+2*i:], w)
		}
		add(IQ1_M, b, want)
	}
	return cases
}

func TestIQuantHandBuiltBlocksDequantizeToTheFormula(t *testing.T) {
	for _, tc := range iquantBlocks() {
		t.Run(tc.typ.String(), func(t *testing.T) {
			if len(tc.block) != tc.typ.BlockBytes() || len(tc.want) != tc.typ.BlockSize() {
				t.Fatalf("case is %d bytes / %d values, type has %d / %d", len(tc.block), len(tc.want), tc.typ.BlockBytes(), tc.typ.BlockSize())
			}
			got := make([]float32, len(tc.want))
			if err := Dequantize(tc.typ, tc.block, got); err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i := range got {
				if got[i] != tc.want[i] {
					if bad++; bad <= 5 {
						t.Errorf("element %d = %g, want %g", i, got[i], tc.want[i])
					}
				}
			}
			// The elements via DotF32 with unit vectors pick the same values out one block at a time.
			x := make([]float32, len(tc.want))
			for _, i := range []int{0, len(x) - 1} {
				x[i] = 1
				if v := DotF32(tc.typ, tc.block, x); v != tc.want[i] {
					t.Errorf("DotF32 with e_%d = %g, want %g", i, v, tc.want[i])
				}
				x[i] = 0
			}
		})
	}
}

var newTypes = []Type{IQ4_NL, IQ4_XS, MXFP4, IQ2_XXS, IQ3_XXS, IQ2_XS, IQ3_S, IQ2_S, IQ1_S, IQ1_M}

func TestIQuantActivationTypesFollowLlamaCpp(t *testing.T) {
	want := map[Type]Type{IQ4_NL: Q8_0, MXFP4: Q8_0, IQ4_XS: Q8_K, IQ2_XXS: Q8_K, IQ2_XS: Q8_K, IQ2_S: Q8_K,
		IQ3_XXS: Q8_K, IQ3_S: Q8_K, IQ1_S: Q8_K, IQ1_M: Q8_K}
	for _, typ := range newTypes {
		if got := ActivationType(typ); got != want[typ] {
			t.Errorf("ActivationType(%v) = %v, want %v", typ, got, want[typ])
		}
	}
}

// randomRow fills nb blocks with random bytes and then a sane block scale (random scale bytes
// could be Inf or NaN).
func randomRow(typ Type, nb int, r *rand.Rand) []byte {
	bb := typ.BlockBytes()
	row := make([]byte, nb*bb)
	for i := range row {
		row[i] = byte(r.Uint32())
	}
	for i := 0; i < nb; i++ {
		b := row[i*bb : (i+1)*bb]
		d := f16(float32(0.001 + 0.01*r.Float64()))
		switch typ {
		case MXFP4:
			b[0] = byte(110 + r.IntN(20))
		case IQ1_M: // d lives in the top nibbles of the scale words
			for k := 0; k < 4; k++ {
				w := binary.LittleEndian.Uint16(b[48+2*k:])&0x0fff | (d>>(4*k)&0xf)<<12
				binary.LittleEndian.PutUint16(b[48+2*k:], w)
			}
		default:
			put16(b, d)
		}
	}
	return row
}

// The activation-quantized dot equals the exact (float64) dot of the dequantized row with x
// up to the activation's rounding: each activation moves by at most half its block's step
// (amax/127 for Q8_K; Q8_0 stores the step as f16, so allow 0.5+2^-11*127 < 0.57 steps), so
// |got - exact| <= sum_i |w_i| * 0.57 * amax_block(i)/127, plus 1e-5 relative for float32
// accumulation.
func TestIQuantDotMatchesDequantizedRowWithinActivationRounding(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 34))
	for _, typ := range newTypes {
		t.Run(typ.String(), func(t *testing.T) {
			for trial := 0; trial < 20; trial++ {
				n := 512
				row := randomRow(typ, n/typ.BlockSize(), r)
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				if trial%4 == 0 {
					x[r.IntN(n)] = -8 // a negative extreme sets the Q8_K scale's sign
				}
				w := make([]float32, n)
				if err := Dequantize(typ, row, w); err != nil {
					t.Fatal(err)
				}
				ab := ActivationType(typ).BlockSize()
				var exact, bound, mag float64
				for i := 0; i < n; i += ab {
					var amax float64
					for _, v := range x[i : i+ab] {
						amax = math.Max(amax, math.Abs(float64(v)))
					}
					for j := i; j < i+ab; j++ {
						exact += float64(w[j]) * float64(x[j])
						bound += math.Abs(float64(w[j])) * 0.57 * amax / 127
						mag += math.Abs(float64(w[j]) * float64(x[j]))
					}
				}
				bound += 1e-5 * mag
				xq := QuantizeActivation(typ, x, nil)
				if got := DotQuantized(typ, row, xq, n); math.Abs(float64(got)-exact) > bound {
					t.Fatalf("trial %d: DotQuantized = %g, exact %g, |diff| %g > bound %g", trial, got, exact, math.Abs(float64(got)-exact), bound)
				}
				if got := DotF32(typ, row, x); math.Abs(float64(got)-exact) > 1e-5*mag+1e-6 {
					t.Fatalf("trial %d: DotF32 = %g, exact %g", trial, got, exact)
				}
				out := make([]float32, 2)
				MatVec(typ, append(row[:len(row):len(row)], row...), 2, n, x, out)
				if want := DotQuantized(typ, row, xq, n); out[0] != want || out[1] != want {
					t.Fatalf("trial %d: MatVec = %v, DotQuantized %g", trial, out, want)
				}
			}
		})
	}
}

// The grid quantizers' root-mean-square error relative to the data's RMS, on Gaussian data:
// well below 1 (which all-zero output gives) and ordered as the grids' sizes are. Ceilings are
// the values measured when the quantizers were written plus about 10%; a packing mistake
// (an index bit or a scale in the wrong place) decodes to unrelated values and lands near
// or above 1.
func TestGridQuantizersRoundTripRMS(t *testing.T) {
	ceiling := map[Type]float64{IQ2_XXS: 0.40, IQ2_XS: 0.34, IQ2_S: 0.29, IQ3_XXS: 0.22, IQ3_S: 0.155}
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, typ := range []Type{IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S} {
		q, err := Quantize(typ, x)
		if err != nil {
			t.Fatal(err)
		}
		y := make([]float32, len(x))
		if err := Dequantize(typ, q, y); err != nil {
			t.Fatal(err)
		}
		var e2, x2 float64
		for i := range x {
			e2 += float64(x[i]-y[i]) * float64(x[i]-y[i])
			x2 += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(e2 / x2)
		t.Logf("%v relative RMS error %.4f", typ, rel)
		if rel > ceiling[typ] {
			t.Errorf("%v: relative RMS error %.4f exceeds %.4f", typ, rel, ceiling[typ])
		}
	}
}
