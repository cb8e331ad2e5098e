package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// DotF32 returns the dot product of one quantized row of type t with the float vector x.
// The row holds len(x) elements; len(x) must be a multiple of t's block size and row must
// hold at least t.RowBytes(len(x)) bytes (checked: a violation is a programming error and panics).
// It dequantizes one block at a time and never allocates.
func DotF32(t Type, row []byte, x []float32) float32 {
	need, err := t.RowBytes(len(x))
	if err != nil {
		panic(fmt.Sprintf("quant.DotF32: %v", err))
	}
	if len(row) < need {
		panic(fmt.Sprintf("quant.DotF32 %v: row has %d bytes, %d elements need %d", t, len(row), len(x), need))
	}
	switch t {
	case F32:
		return dotF32(row, x)
	case F16:
		return dotF16(row, x)
	case BF16:
		return dotBF16(row, x)
	}
	f := blockDequantizer(t)
	bs, bb := t.BlockSize(), t.BlockBytes()
	var buf [QKK]float32
	blk := buf[:bs]
	var s float32
	for i := 0; i < len(x)/bs; i++ {
		f(row[i*bb:(i+1)*bb], blk)
		xs := x[i*bs : (i+1)*bs]
		for j, v := range blk {
			s += v * xs[j]
		}
	}
	return s
}

func dotF16Go(row []byte, x []float32) float32 {
	var s0, s1 float32
	w := row[:2*len(x)]
	i := 0
	for ; i+2 <= len(x); i += 2 {
		b := w[2*i : 2*i+4]
		xs := x[i : i+2]
		s0 += f16Table[binary.LittleEndian.Uint16(b[0:])] * xs[0]
		s1 += f16Table[binary.LittleEndian.Uint16(b[2:])] * xs[1]
	}
	for ; i < len(x); i++ {
		s0 += f16Table[binary.LittleEndian.Uint16(w[2*i:])] * x[i]
	}
	return s0 + s1
}

func dotBF16Go(row []byte, x []float32) float32 {
	var s0, s1 float32
	w := row[:2*len(x)]
	i := 0
	for ; i+2 <= len(x); i += 2 {
		b := w[2*i : 2*i+4]
		xs := x[i : i+2]
		s0 += BF16ToF32(binary.LittleEndian.Uint16(b[0:])) * xs[0]
		s1 += BF16ToF32(binary.LittleEndian.Uint16(b[2:])) * xs[1]
	}
	for ; i < len(x); i++ {
		s0 += BF16ToF32(binary.LittleEndian.Uint16(w[2*i:])) * x[i]
	}
	return s0 + s1
}

func dotF32Go(row []byte, x []float32) float32 {
	var s0, s1, s2, s3 float32
	w := row[:4*len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		b := w[4*i : 4*i+16]
		xs := x[i : i+4]
		s0 += math.Float32frombits(binary.LittleEndian.Uint32(b[0:])) * xs[0]
		s1 += math.Float32frombits(binary.LittleEndian.Uint32(b[4:])) * xs[1]
		s2 += math.Float32frombits(binary.LittleEndian.Uint32(b[8:])) * xs[2]
		s3 += math.Float32frombits(binary.LittleEndian.Uint32(b[12:])) * xs[3]
	}
	for ; i < len(x); i++ {
		s0 += math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// ActivationType returns the type the activation vector is quantized to before it is
// multiplied with weights of type weight, as llama.cpp's CPU backend pairs them (its
// vec_dot_type): Q8_0 for Q4_0/Q5_0/Q8_0, IQ4_NL and MXFP4; Q8_1 for Q4_1/Q5_1; Q8_K for the
// K-quants, IQ4_XS and the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S); F32 for everything else. (For F16 and BF16 weights the layout
// is F32, but QuantizeActivation rounds the values to the weight's precision; see there.)
func ActivationType(weight Type) Type {
	switch weight {
	case Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4:
		return Q8_0
	case Q4_1, Q5_1:
		return Q8_1
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M:
		return Q8_K
	}
	return F32
}

// QuantizeActivation quantizes x into the ActivationType(weight) layout, reusing dst's
// storage when it is large enough, and returns the encoded bytes. len(x) must be a multiple
// of the block size of ActivationType(weight) (a violation panics).
// For an F32 activation type the result is x's float32 values in little-endian order; for F16
// and BF16 weights each value is first rounded to F16/BF16 (round half to even), because
// llama.cpp converts the activation to the weight's type before these dot products and the
// logits are meant to agree with it.
func QuantizeActivation(weight Type, x []float32, dst []byte) []byte {
	at := ActivationType(weight)
	n, err := at.RowBytes(len(x))
	if err != nil {
		panic(fmt.Sprintf("quant.QuantizeActivation for %v: %v", weight, err))
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	switch at {
	case F32:
		switch {
		case weight == F16 && littleEndian:
			roundF16(f32View(dst, len(x)), x)
		case weight == F16:
			for i, v := range x {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f16Table[F32ToF16(v)]))
			}
		case weight == BF16:
			for i, v := range x {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(BF16ToF32(F32ToBF16(v))))
			}
		case littleEndian:
			copy(f32View(dst, len(x)), x)
		default:
			for i, v := range x {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
			}
		}
	case Q8_0:
		for i := 0; i < len(x)/QK; i++ {
			actQ8(x[i*QK:(i+1)*QK], dst[i*34:(i+1)*34], false)
		}
	case Q8_1:
		for i := 0; i < len(x)/QK; i++ {
			actQ8(x[i*QK:(i+1)*QK], dst[i*36:(i+1)*36], true)
		}
	case Q8_K:
		for i := 0; i < len(x)/QKK; i++ {
			quantQ8K(x[i*QKK:(i+1)*QKK], dst[i*292:(i+1)*292])
		}
	}
	return dst
}

// actQ8 quantizes 32 activations the way llama.cpp's x86 path does:
// d = amax/127, q = round-half-even(x*127/amax); Q8_1 also stores s = d*sum(q).
func actQ8(x []float32, b []byte, withSum bool) {
	xs := (*[32]float32)(x)
	var amax float32
	for _, v := range xs {
		if a := abs32(v); a > amax {
			amax = a
		}
	}
	d := amax / 127
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	binary.LittleEndian.PutUint16(b, F32ToF16(d))
	off := 2
	if withSum {
		off = 4
	}
	qs := (*[32]byte)(b[off : off+32])
	var sum int32
	for j, v := range xs {
		q := nearestInt(v * id)
		sum += q
		qs[j] = byte(int8(q))
	}
	if withSum {
		binary.LittleEndian.PutUint16(b[2:], F32ToF16(d*float32(sum)))
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// nearestInt rounds v (|v| < 2^22) to the nearest integer, ties to even, in float32
// arithmetic: adding 1.5*2^23 leaves the rounded integer in the low mantissa bits.
func nearestInt(v float32) int32 {
	const magic = 12582912  // 1.5 * 2^23
	r := float32(v) + magic // the conversion keeps v's own rounding (no fused multiply-add)
	return int32(math.Float32bits(r)&0x7fffff) - 0x400000
}

// DotQuantized returns the dot product of one weight row (n elements of type weight) with an
// activation vector quantized by QuantizeActivation(weight, ...). Q-types use integer dot
// products per block times the block scales, as llama.cpp's CPU backend does.
// n must be a multiple of the weight's block size and the slices must hold the n elements
// (a violation panics).
func DotQuantized(weight Type, row []byte, xq []byte, n int) float32 {
	wi, ok := weight.info()
	ai, _ := ActivationType(weight).info()
	if !ok || n < 0 || n%ai.blockSize != 0 || n%wi.blockSize != 0 {
		panic(fmt.Sprintf("quant.DotQuantized %v: %d elements is not a multiple of the block size %d", weight, n, wi.blockSize))
	}
	if len(row) < n/wi.blockSize*wi.blockBytes || len(xq) < n/ai.blockSize*ai.blockBytes {
		panic(fmt.Sprintf("quant.DotQuantized %v: %d elements need %d row bytes (have %d) and %d activation bytes (have %d)",
			weight, n, n/wi.blockSize*wi.blockBytes, len(row), n/ai.blockSize*ai.blockBytes, len(xq)))
	}
	switch weight {
	case Q8_0:
		return dotQ8_0(row[:n/QK*34], xq[:n/QK*34])
	case Q4_0:
		return dotQ4_0(row[:n/QK*18], xq[:n/QK*34])
	case Q5_0:
		return dotQ5_0(row[:n/QK*22], xq[:n/QK*34])
	case Q4_1:
		return dotQ4_1(row[:n/QK*20], xq[:n/QK*36])
	case Q5_1:
		return dotQ5_1(row[:n/QK*24], xq[:n/QK*36])
	case Q2_K:
		return dotQ2K(row[:n/QKK*84], xq[:n/QKK*292])
	case Q3_K:
		return dotQ3K(row[:n/QKK*110], xq[:n/QKK*292])
	case Q4_K:
		return dotQ4K(row[:n/QKK*144], xq[:n/QKK*292])
	case Q5_K:
		return dotQ5K(row[:n/QKK*176], xq[:n/QKK*292])
	case Q6_K:
		return dotQ6K(row[:n/QKK*210], xq[:n/QKK*292])
	case IQ4_NL:
		return dotIQ4NLGo(row[:n/QK*18], xq[:n/QK*34])
	case MXFP4:
		return dotMXFP4Go(row[:n/QK*17], xq[:n/QK*34])
	case IQ4_XS:
		return dotIQ4XSGo(row[:n/QKK*136], xq[:n/QKK*292])
	}
	if gq := gridQuantOf(weight); gq != nil {
		return gq.dot(row[:n/QKK*gq.bytes], xq[:n/QKK*292])
	}
	return DotF32(weight, row, f32View(xq, n))
}

func roundF16Go(dst, x []float32) {
	for i, v := range x[:len(dst)] {
		dst[i] = f16Table[F32ToF16(v)]
	}
}

// DotQuantizedBatch sets out[i] = row · xqs[i] for activations quantized by
// QuantizeActivation(weight, ...), the multiplication DotQuantized does for one. With several
// tokens (prompt processing) it decodes each weight block once for up to four activations
// (Q8_0 and Q4_0 weights on amd64). The results equal DotQuantized's up to float32
// accumulation order. Sizes as for DotQuantized; len(out) >= len(xqs) (a violation panics).
func DotQuantizedBatch(weight Type, row []byte, xqs [][]byte, n int, out []float32) {
	out = out[:len(xqs)]
	i := 0
	if weight == Q8_0 || weight == Q4_0 {
		bs := weight.BlockSize()
		if n%bs != 0 {
			panic(fmt.Sprintf("quant.DotQuantizedBatch %v: %d elements is not a multiple of the block size %d", weight, n, bs))
		}
		nb := n / bs
		row = row[:nb*weight.BlockBytes()]
		for ; i+4 <= len(xqs); i += 4 {
			var xs [4][]byte
			for k := range xs {
				xs[k] = xqs[i+k][:nb*34]
			}
			if !dotBatch4(weight, row, &xs, nb, (*[4]float32)(out[i:i+4])) {
				break
			}
		}
	}
	for ; i < len(xqs); i++ {
		out[i] = DotQuantized(weight, row, xqs[i], n)
	}
}

var littleEndian = func() bool {
	v := uint16(1)
	return *(*byte)(unsafe.Pointer(&v)) == 1
}()

// f32View returns the first n little-endian float32 values of b without copying where the
// machine is little-endian.
func f32View(b []byte, n int) []float32 {
	b = b[:4*n]
	if littleEndian {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

// MatVecQuantized computes out[r] = rows[r] · x for nRows rows of nCols elements, with x
// already quantized by QuantizeActivation(weight, ...). Callers that split the rows over
// goroutines quantize x once and give each goroutine its own row range.
func MatVecQuantized(weight Type, rows []byte, nRows, nCols int, xq []byte, out []float32) {
	rb, err := weight.RowBytes(nCols)
	if err != nil {
		panic(fmt.Sprintf("quant.MatVecQuantized: %v", err))
	}
	if len(rows) < nRows*rb || len(out) < nRows {
		panic(fmt.Sprintf("quant.MatVecQuantized %v %dx%d: rows %d bytes (need %d), out %d",
			weight, nRows, nCols, len(rows), nRows*rb, len(out)))
	}
	for r := 0; r < nRows; r++ {
		out[r] = DotQuantized(weight, rows[r*rb:(r+1)*rb], xq, nCols)
	}
}

var actPool = sync.Pool{New: func() any { return new([]byte) }}

// MatVec computes out[r] = rows[r] · x for nRows rows of nCols elements of type weight,
// quantizing x once with QuantizeActivation and using DotQuantized per row.
// It runs on the calling goroutine; callers parallelise by splitting the row range.
func MatVec(weight Type, rows []byte, nRows, nCols int, x []float32, out []float32) {
	rb, err := weight.RowBytes(nCols)
	if err != nil {
		panic(fmt.Sprintf("quant.MatVec: %v", err))
	}
	if len(rows) < nRows*rb || len(x) < nCols || len(out) < nRows {
		panic(fmt.Sprintf("quant.MatVec %v %dx%d: rows %d bytes (need %d), x %d, out %d",
			weight, nRows, nCols, len(rows), nRows*rb, len(x), len(out)))
	}
	bp := actPool.Get().(*[]byte)
	xq := QuantizeActivation(weight, x[:nCols], *bp)
	MatVecQuantized(weight, rows, nRows, nCols, xq, out)
	*bp = xq
	actPool.Put(bp)
}

func i8(b byte) int32 { return int32(int8(b)) }

func dotQ8_0Go(w, x []byte) float32 {
	var s float32
	for len(w) >= 34 && len(x) >= 34 {
		a := (*[34]byte)(w)
		b := (*[34]byte)(x)
		var s0, s1, s2, s3 int32
		for j := 2; j < 34; j += 4 {
			s0 += i8(a[j]) * i8(b[j])
			s1 += i8(a[j+1]) * i8(b[j+1])
			s2 += i8(a[j+2]) * i8(b[j+2])
			s3 += i8(a[j+3]) * i8(b[j+3])
		}
		s += float32(s0+s1+s2+s3) * (half(a[:]) * half(b[:]))
		w, x = w[34:], x[34:]
	}
	return s
}

func dotQ4_0Go(w, x []byte) float32 {
	var s float32
	for len(w) >= 18 && len(x) >= 34 {
		a := (*[18]byte)(w)
		b := (*[34]byte)(x)
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			q := a[2+j]
			s0 += (int32(q&0xf) - 8) * i8(b[2+j])
			s1 += (int32(q>>4) - 8) * i8(b[18+j])
		}
		s += float32(s0+s1) * (half(a[:]) * half(b[:]))
		w, x = w[18:], x[34:]
	}
	return s
}

func dotQ5_0Go(w, x []byte) float32 {
	var s float32
	for len(w) >= 22 && len(x) >= 34 {
		a := (*[22]byte)(w)
		b := (*[34]byte)(x)
		qh := binary.LittleEndian.Uint32(a[2:])
		var sum int32
		for j := 0; j < 16; j++ {
			q := a[6+j]
			lo := int32(q&0xf) | int32(qh>>j&1)<<4
			hi := int32(q>>4) | int32(qh>>(j+16)&1)<<4
			sum += (lo-16)*i8(b[2+j]) + (hi-16)*i8(b[18+j])
		}
		s += float32(sum) * (half(a[:]) * half(b[:]))
		w, x = w[22:], x[34:]
	}
	return s
}

// Q4_1·Q8_1: sum(q*d + m)(y*dy) = d*dy*sum(q*y) + m*s where s = dy*sum(y).
func dotQ4_1Go(w, x []byte) float32 {
	var s float32
	for len(w) >= 20 && len(x) >= 36 {
		a := (*[20]byte)(w)
		b := (*[36]byte)(x)
		var sum int32
		for j := 0; j < 16; j++ {
			q := a[4+j]
			sum += int32(q&0xf)*i8(b[4+j]) + int32(q>>4)*i8(b[20+j])
		}
		s += float32(sum)*(half(a[:])*half(b[:])) + half(a[2:])*half(b[2:])
		w, x = w[20:], x[36:]
	}
	return s
}

func dotQ5_1Go(w, x []byte) float32 {
	var s float32
	for len(w) >= 24 && len(x) >= 36 {
		a := (*[24]byte)(w)
		b := (*[36]byte)(x)
		qh := binary.LittleEndian.Uint32(a[4:])
		var sum int32
		for j := 0; j < 16; j++ {
			q := a[8+j]
			lo := int32(q&0xf) | int32(qh>>j&1)<<4
			hi := int32(q>>4) | int32(qh>>(j+16)&1)<<4
			sum += lo*i8(b[4+j]) + hi*i8(b[20+j])
		}
		s += float32(sum)*(half(a[:])*half(b[:])) + half(a[2:])*half(b[2:])
		w, x = w[24:], x[36:]
	}
	return s
}

// q8k gives the parts of one Q8_K block.
func q8k(b *[292]byte) (d float32, qs *[256]byte) {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[:])), (*[256]byte)(b[4:260])
}

func bsum(b *[292]byte, g int) int32 { return int32(int16(binary.LittleEndian.Uint16(b[260+2*g:]))) }

func dotQ2KGo(w, x []byte) float32 {
	var s float32
	for len(w) >= 84 && len(x) >= 292 {
		a := (*[84]byte)(w)
		b := (*[292]byte)(x)
		dy, y := q8k(b)
		var sumi, summ int32
		for j := 0; j < 16; j++ {
			h, k, part := j/8, (j%8)/2, j%2
			q := (*[16]byte)(a[16+32*h+16*part:])
			yy := (*[16]byte)(y[16*j:])
			shift := uint(2 * k)
			var p int32
			for l := 0; l < 16; l++ {
				p += int32(q[l]>>shift&3) * i8(yy[l])
			}
			sumi += int32(a[j]&0xf) * p
			summ += int32(a[j]>>4) * bsum(b, j)
		}
		s += dy*half(a[80:])*float32(sumi) - dy*half(a[82:])*float32(summ)
		w, x = w[84:], x[292:]
	}
	return s
}

func dotQ3KGo(w, x []byte) float32 {
	var s float32
	var sc [16]int8
	for len(w) >= 110 && len(x) >= 292 {
		a := (*[110]byte)(w)
		b := (*[292]byte)(x)
		dy, y := q8k(b)
		q3Scales(a[96:108], &sc)
		var sumi int32
		for j := 0; j < 16; j++ {
			h, k, part := j/8, (j%8)/2, j%2
			q := (*[16]byte)(a[32+32*h+16*part:])
			hm := (*[16]byte)(a[16*part:])
			mask := byte(1) << uint(4*h+k)
			yy := (*[16]byte)(y[16*j:])
			shift := uint(2 * k)
			var p int32
			for l := 0; l < 16; l++ {
				v := int32(q[l] >> shift & 3)
				if hm[l]&mask == 0 {
					v -= 4
				}
				p += v * i8(yy[l])
			}
			sumi += int32(sc[j]) * p
		}
		s += dy * half(a[108:]) * float32(sumi)
		w, x = w[110:], x[292:]
	}
	return s
}

// q4kScales decodes the 8 scales and mins of a Q4_K/Q5_K block.
func q4kScales(s []byte, sc, m *[8]int32) {
	for j := 0; j < 8; j++ {
		a, b := scaleMinK4(j, s)
		sc[j], m[j] = int32(a), int32(b)
	}
}

func dotQ4KGo(w, x []byte) float32 {
	var s float32
	var sc, m [8]int32
	for len(w) >= 144 && len(x) >= 292 {
		a := (*[144]byte)(w)
		b := (*[292]byte)(x)
		dy, y := q8k(b)
		q4kScales(a[4:16], &sc, &m)
		var sumi, summ int32
		for c := 0; c < 4; c++ {
			q := (*[32]byte)(a[16+32*c:])
			y1 := (*[32]byte)(y[64*c:])
			y2 := (*[32]byte)(y[64*c+32:])
			var p1, p2 int32
			for l := 0; l < 32; l++ {
				p1 += int32(q[l]&0xf) * i8(y1[l])
				p2 += int32(q[l]>>4) * i8(y2[l])
			}
			sumi += sc[2*c]*p1 + sc[2*c+1]*p2
		}
		for j := 0; j < 8; j++ {
			summ += m[j] * (bsum(b, 2*j) + bsum(b, 2*j+1))
		}
		s += dy*half(a[:])*float32(sumi) - dy*half(a[2:])*float32(summ)
		w, x = w[144:], x[292:]
	}
	return s
}

func dotQ5KGo(w, x []byte) float32 {
	var s float32
	var sc, m [8]int32
	for len(w) >= 176 && len(x) >= 292 {
		a := (*[176]byte)(w)
		b := (*[292]byte)(x)
		dy, y := q8k(b)
		q4kScales(a[4:16], &sc, &m)
		qh := (*[32]byte)(a[16:48])
		var sumi, summ int32
		for c := 0; c < 4; c++ {
			q := (*[32]byte)(a[48+32*c:])
			y1 := (*[32]byte)(y[64*c:])
			y2 := (*[32]byte)(y[64*c+32:])
			var p1, p2 int32
			for l := 0; l < 32; l++ {
				lo := int32(q[l]&0xf) | int32(qh[l]>>(2*c)&1)<<4
				hi := int32(q[l]>>4) | int32(qh[l]>>(2*c+1)&1)<<4
				p1 += lo * i8(y1[l])
				p2 += hi * i8(y2[l])
			}
			sumi += sc[2*c]*p1 + sc[2*c+1]*p2
		}
		for j := 0; j < 8; j++ {
			summ += m[j] * (bsum(b, 2*j) + bsum(b, 2*j+1))
		}
		s += dy*half(a[:])*float32(sumi) - dy*half(a[2:])*float32(summ)
		w, x = w[176:], x[292:]
	}
	return s
}

func dotQ6KGo(w, x []byte) float32 {
	var s float32
	for len(w) >= 210 && len(x) >= 292 {
		a := (*[210]byte)(w)
		b := (*[292]byte)(x)
		dy, y := q8k(b)
		var sumi int32
		for h := 0; h < 2; h++ {
			ql := (*[64]byte)(a[64*h:])
			qh := (*[32]byte)(a[128+32*h:])
			yy := (*[128]byte)(y[128*h:])
			var p [8]int32
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				p[is] += q1 * i8(yy[l])
				p[is+2] += q2 * i8(yy[l+32])
				p[is+4] += q3 * i8(yy[l+64])
				p[is+6] += q4 * i8(yy[l+96])
			}
			for g := 0; g < 8; g++ {
				sumi += int32(int8(a[192+8*h+g])) * p[g]
			}
		}
		s += dy * half(a[208:]) * float32(sumi)
		w, x = w[210:], x[292:]
	}
	return s
}
