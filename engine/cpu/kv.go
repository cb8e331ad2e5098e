package cpu

import (
	"math"

	"github.com/vkllm/vkllm/engine/quant"
)

// KVType is the element type of the KV cache.
type KVType string

const (
	KVF16 KVType = "f16" // llama.cpp's default; logits agree with it only at this type
	KVF32 KVType = "f32"
)

// kvCache holds every layer's keys and values, one row per position. Rows are appended as
// positions fill (capacity grows by doubling up to the context), so a large context costs memory
// only once it is used.
type kvCache struct {
	typ        KVType
	kDim, vDim int // row widths: HeadsKV*HeadDim, HeadsKV*ValueDim
	ctx        int
	k16, v16   [][]uint16 // per layer, f16 cache
	k32, v32   [][]float32
}

func newKVCache(typ KVType, layers, kDim, vDim, ctx int) *kvCache {
	c := &kvCache{typ: typ, kDim: kDim, vDim: vDim, ctx: ctx}
	if typ == KVF32 {
		c.k32, c.v32 = make([][]float32, layers), make([][]float32, layers)
	} else {
		c.k16, c.v16 = make([][]uint16, layers), make([][]uint16, layers)
	}
	return c
}

// store writes the keys and values of position pos in layer l. Positions are written in order,
// but a position may be overwritten (after a rewind).
func (c *kvCache) store(l, pos int, k, v []float32) {
	if c.typ == KVF32 {
		c.k32[l] = storeRow(c.k32[l], pos, c.kDim, c.ctx, k, func(x float32) float32 { return x })
		c.v32[l] = storeRow(c.v32[l], pos, c.vDim, c.ctx, v, func(x float32) float32 { return x })
		return
	}
	c.k16[l] = storeRow(c.k16[l], pos, c.kDim, c.ctx, k, quant.F32ToF16)
	c.v16[l] = storeRow(c.v16[l], pos, c.vDim, c.ctx, v, quant.F32ToF16)
}

func storeRow[E any](buf []E, pos, width, ctx int, src []float32, conv func(float32) E) []E {
	need := (pos + 1) * width
	if need > len(buf) {
		if need > cap(buf) {
			newCap := max(need, 2*cap(buf), 16*width)
			newCap = min(newCap, ctx*width)
			grown := make([]E, len(buf), max(newCap, need))
			copy(grown, buf)
			buf = grown
		}
		buf = buf[:need]
	}
	row := buf[pos*width : need]
	for i, x := range src {
		row[i] = conv(x)
	}
	return buf
}

// truncate forgets every position at or after pos.
func (c *kvCache) truncate(pos int) {
	for l := range c.k16 {
		c.k16[l] = c.k16[l][:min(len(c.k16[l]), pos*c.kDim)]
		c.v16[l] = c.v16[l][:min(len(c.v16[l]), pos*c.vDim)]
	}
	for l := range c.k32 {
		c.k32[l] = c.k32[l][:min(len(c.k32[l]), pos*c.kDim)]
		c.v32[l] = c.v32[l][:min(len(c.v32[l]), pos*c.vDim)]
	}
}

// attendHead computes one head's attention output for a query at position pos over positions
// 0..pos: out = Σ_t softmax(q·K_t * scale) V_t, reading the KV head's slice at kOff/vOff.
// scores must hold pos+1 values.
func (c *kvCache) attendHead(l, pos int, q []float32, kOff, vOff int, scale float32, scores, out []float32) {
	if c.typ == KVF16 {
		c.attendHeadF16(l, pos, q, kOff, vOff, scale, out)
		return
	}
	hd := len(q)
	scores = scores[:pos+1]
	keys := c.k32[l]
	for t := range scores {
		scores[t] = dotF32(q, keys[t*c.kDim+kOff:t*c.kDim+kOff+hd]) * scale
	}
	softmax(scores)
	clear(out)
	vd := len(out)
	vals := c.v32[l]
	for t, p := range scores {
		axpy(out, p, vals[t*c.vDim+vOff:t*c.vDim+vOff+vd])
	}
}

// attendHeadF16 is attendHead over the f16 cache with the numerics of llama.cpp's CPU
// flash-attention kernel, which its default configuration uses: a single pass with an online
// softmax (running maximum M and sum S) and the weighted sum of values accumulated in f16,
// rounded after every position. The query must already be rounded to f16. Matching this
// matters: for quantized weights the f16 rounding changes which way later activations round
// to 8 bits, and the logits move by ~0.1 when the accumulation differs.
func (c *kvCache) attendHeadF16(l, pos int, q []float32, kOff, vOff int, scale float32, out []float32) {
	hd, vd := len(q), len(out)
	keys, vals := c.k16[l], c.v16[l]
	acc := out // holds f16-representable values until the final division
	clear(acc)
	var sum float32
	maxS := float32(math.Inf(-1))
	for t := 0; t <= pos; t++ {
		s := dotF16(q, keys[t*c.kDim+kOff:t*c.kDim+kOff+hd]) * scale
		ms, vs := float32(1), float32(1)
		if s > maxS {
			ms = exp32(maxS - s)
			maxS = s
			for d, a := range acc {
				acc[d] = roundToF16(a * ms)
			}
		} else {
			vs = exp32(s - maxS)
		}
		row := vals[t*c.vDim+vOff : t*c.vDim+vOff+vd]
		for d, v := range row {
			acc[d] = roundToF16(fma32(quant.F16ToF32(v), vs, acc[d]))
		}
		sum = fma32(sum, ms, vs)
	}
	inv := float32(0)
	if sum != 0 {
		inv = 1 / sum
	}
	for d := range acc {
		acc[d] *= inv
	}
}

func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }

// fma32 returns a*b+c rounded once to float32 (as a fused multiply-add in float32 does, up to
// double rounding in rare ties).
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// roundToF16 rounds x to the nearest float16 value (ties to even) and returns it as float32.
func roundToF16(x float32) float32 {
	b := math.Float32bits(x)
	e := (b >> 23) & 0xff
	if e >= 113 && e <= 141 { // |x| in [2^-14, 2^15): an f16 normal, keep 10 mantissa bits
		b += 0xfff + (b>>13)&1
		return math.Float32frombits(b &^ 0x1fff)
	}
	return quant.F16ToF32(quant.F32ToF16(x))
}

func dotF32(a, b []float32) float32 {
	var s float32
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// dotF16 is the dot product of an f16-rounded query with an f16 key row. Products of two f16
// values are exact in float32; they are summed in double precision.
func dotF16(a []float32, b []uint16) float32 {
	var s float64
	for i, x := range a {
		s += float64(x * quant.F16ToF32(b[i]))
	}
	return float32(s)
}

// axpy sets y += a*x.
func axpy(y []float32, a float32, x []float32) {
	for i, v := range x {
		y[i] += a * v
	}
}

func axpyF16(y []float32, a float32, x []uint16) {
	for i, v := range x {
		y[i] += a * quant.F16ToF32(v)
	}
}
