package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

var allTypes = []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, Q8_1, IQ4_NL, IQ4_XS, MXFP4, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S}

func TestTypeLayoutsMatchGGML(t *testing.T) {
	tests := []struct {
		typ        Type
		id         uint32
		name       string
		blockSize  int
		blockBytes int
	}{
		{F32, 0, "F32", 1, 4},
		{F16, 1, "F16", 1, 2},
		{Q4_0, 2, "Q4_0", 32, 18},
		{Q4_1, 3, "Q4_1", 32, 20},
		{Q5_0, 6, "Q5_0", 32, 22},
		{Q5_1, 7, "Q5_1", 32, 24},
		{Q8_0, 8, "Q8_0", 32, 34},
		{Q8_1, 9, "Q8_1", 32, 36},
		{Q2_K, 10, "Q2_K", 256, 84},
		{Q3_K, 11, "Q3_K", 256, 110},
		{Q4_K, 12, "Q4_K", 256, 144},
		{Q5_K, 13, "Q5_K", 256, 176},
		{Q6_K, 14, "Q6_K", 256, 210},
		{Q8_K, 15, "Q8_K", 256, 292},
		{BF16, 30, "BF16", 1, 2},
		// The i-quants and MXFP4: sizes as ggml-common.h's static_asserts state them.
		{IQ2_XXS, 16, "IQ2_XXS", 256, 66},
		{IQ2_XS, 17, "IQ2_XS", 256, 74},
		{IQ3_XXS, 18, "IQ3_XXS", 256, 98},
		{IQ1_S, 19, "IQ1_S", 256, 50},
		{IQ4_NL, 20, "IQ4_NL", 32, 18},
		{IQ3_S, 21, "IQ3_S", 256, 110},
		{IQ2_S, 22, "IQ2_S", 256, 82},
		{IQ4_XS, 23, "IQ4_XS", 256, 136},
		{IQ1_M, 29, "IQ1_M", 256, 56},
		{MXFP4, 39, "MXFP4", 32, 17},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if uint32(tc.typ) != tc.id {
				t.Errorf("id = %d, want %d", uint32(tc.typ), tc.id)
			}
			if !tc.typ.Valid() {
				t.Errorf("Valid() = false")
			}
			if got := tc.typ.String(); got != tc.name {
				t.Errorf("String() = %q, want %q", got, tc.name)
			}
			if got := tc.typ.BlockSize(); got != tc.blockSize {
				t.Errorf("BlockSize() = %d, want %d", got, tc.blockSize)
			}
			if got := tc.typ.BlockBytes(); got != tc.blockBytes {
				t.Errorf("BlockBytes() = %d, want %d", got, tc.blockBytes)
			}
			if got, err := tc.typ.RowBytes(4 * tc.blockSize); err != nil || got != 4*tc.blockBytes {
				t.Errorf("RowBytes(4 blocks) = %d, %v, want %d", got, err, 4*tc.blockBytes)
			}
			if p, err := ParseType(tc.name); err != nil || p != tc.typ {
				t.Errorf("ParseType(%q) = %v, %v", tc.name, p, err)
			}
		})
	}
}

func TestUnknownTypeIsInvalidAndNamedByID(t *testing.T) {
	for _, id := range []uint32{4, 5, 24, 28, 31, 34, 35, 40, 1000} {
		typ := Type(id)
		if typ.Valid() {
			t.Errorf("Type(%d).Valid() = true", id)
		}
		if typ.BlockSize() != 0 || typ.BlockBytes() != 0 {
			t.Errorf("Type(%d) block size/bytes = %d/%d, want 0/0", id, typ.BlockSize(), typ.BlockBytes())
		}
		if _, err := typ.RowBytes(32); err == nil {
			t.Errorf("Type(%d).RowBytes succeeded", id)
		}
	}
	if got := Type(4).String(); got != "type(4)" {
		t.Errorf("String() = %q", got)
	}
	if _, err := ParseType("Q4_2"); err == nil {
		t.Error("ParseType(Q4_2) succeeded")
	}
}

func TestRowBytesRejectsNonMultiplesAndNegatives(t *testing.T) {
	tests := []struct {
		typ Type
		n   int
	}{
		{Q4_0, 33}, {Q4_0, 16}, {Q8_0, 31}, {Q4_K, 128}, {Q6_K, 257}, {Q2_K, 32}, {F32, -1}, {Q4_K, -256},
		{Q8_0, maxInt / 32 * 32},
	}
	for _, tc := range tests {
		if got, err := tc.typ.RowBytes(tc.n); err == nil {
			t.Errorf("%v.RowBytes(%d) = %d, want an error", tc.typ, tc.n, got)
		}
	}
	if got, err := Q4_K.RowBytes(0); err != nil || got != 0 {
		t.Errorf("RowBytes(0) = %d, %v", got, err)
	}
}

func TestF16ToF32ExactOnSpecialValues(t *testing.T) {
	tests := []struct {
		h    uint16
		want float64
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x3555, 0.333251953125},
		{0x7bff, 65504},
		{0x0400, math.Ldexp(1, -14)},        // smallest normal
		{0x0001, math.Ldexp(1, -24)},        // smallest subnormal
		{0x03ff, 1023 * math.Ldexp(1, -24)}, // largest subnormal
		{0x8001, -math.Ldexp(1, -24)},
		{0x7c00, math.Inf(1)},
		{0xfc00, math.Inf(-1)},
	}
	for _, tc := range tests {
		if got := F16ToF32(tc.h); float64(got) != tc.want {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", tc.h, got, tc.want)
		}
	}
	if got := F16ToF32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("F16ToF32(0x8000) = %g, want -0", got)
	}
	for _, h := range []uint16{0x7c01, 0x7e00, 0xfe00, 0x7fff} {
		if got := F16ToF32(h); !math.IsNaN(float64(got)) {
			t.Errorf("F16ToF32(%#04x) = %g, want NaN", h, got)
		}
	}
}

func TestF32ToF16RoundTripsEveryHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		got := F32ToF16(f)
		if math.IsNaN(float64(f)) {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x became %#04x", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, got)
		}
	}
}

// TestF32ToF16RoundsToNearestEven checks the rounding of arbitrary floats against a brute-force
// search among neighbouring halves, computed in float64.
func TestF32ToF16RoundsToNearestEven(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(f float32) {
		h := F32ToF16(f)
		got := float64(F16ToF32(h))
		x := float64(f)
		if math.Abs(x) > 65520 || (math.Abs(x) == 65520) {
			if !math.IsInf(got, 0) || math.Signbit(got) != math.Signbit(x) {
				t.Fatalf("F32ToF16(%g) = %g, want ±inf", f, got)
			}
			return
		}
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7c00 == 0x7c00 {
				continue
			}
			alt := float64(F16ToF32(nb))
			if math.Signbit(alt) != math.Signbit(got) && got != 0 {
				continue
			}
			da, dg := math.Abs(alt-x), math.Abs(got-x)
			if da < dg || (da == dg && h&1 == 1) {
				t.Fatalf("F32ToF16(%g) = %#04x (%g), but %#04x (%g) is nearer or even", f, h, got, nb, alt)
			}
		}
	}
	for i := 0; i < 200000; i++ {
		check(math.Float32frombits(r.Uint32()&0x477fffff | r.Uint32()&0x80000000)) // |x| < 65536
	}
	// Exact ties: midpoints between consecutive halves (normal and subnormal).
	for _, h := range []uint16{0x0000, 0x0001, 0x0002, 0x03ff, 0x3c00, 0x3c01, 0x7bfe, 0x7bff} {
		a, b := float64(F16ToF32(h)), float64(F16ToF32(h+1))
		mid := float32((a + b) / 2)
		if float64(mid) != (a+b)/2 {
			t.Fatalf("midpoint of %#04x not representable", h)
		}
		want := h
		if h&1 == 1 {
			want = h + 1
		}
		if got := F32ToF16(mid); got != want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x (ties to even)", mid, got, want)
		}
	}
	for _, f := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 1e10, -1e10, 1e-10} {
		check(f)
	}
	if got := F32ToF16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("F32ToF16(NaN) = %#04x, want a NaN", got)
	}
}

func TestBF16Conversion(t *testing.T) {
	tests := []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81},
		{float32(math.Inf(1)), 0x7f80},
	}
	for _, tc := range tests {
		if got := F32ToBF16(tc.f); got != tc.want {
			t.Errorf("F32ToBF16(%g) = %#04x, want %#04x", tc.f, got, tc.want)
		}
	}
	if got := F32ToBF16(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("F32ToBF16(NaN) = %#04x, want a NaN", got)
	}
	if got := BF16ToF32(0x4049); got != math.Float32frombits(0x40490000) {
		t.Errorf("BF16ToF32(0x4049) = %g", got)
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	// Some blocks with outliers, some all-zero, some constant: edge cases of the quantizers.
	if n >= 512 {
		x[7] = 9
		for i := 256; i < 288; i++ {
			x[i] = 0
		}
		for i := 288; i < 320; i++ {
			x[i] = -0.75
		}
	}
	return x
}

func put16(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

func f16(v float32) uint16 { return F32ToF16(v) }
