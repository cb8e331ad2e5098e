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
	skip       []bool // layers without a cache (recurrent ones), nil = none
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

// positions is the number of positions cached in every one of layers 0..layers-1 (the
// context when layers is 0: no cache constrains a pass through no blocks).
func (c *kvCache) positions(layers int) int {
	n := c.ctx
	for l := 0; l < layers; l++ {
		if l < len(c.skip) && c.skip[l] {
			continue
		}
		if c.typ == KVF32 {
			n = min(n, len(c.k32[l])/c.kDim)
		} else {
			n = min(n, len(c.k16[l])/c.kDim)
		}
	}
	return n
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

// attnScratch is one worker's scratch space for attendHead.
type attnScratch struct {
	scores []float32 // one score per position
	ms, vs []float32 // f16 cache: per position, the accumulator's rescale and the value weight
	acc    []uint16  // f16 cache: the f16 weighted sum of values
}

// grow makes the scratch hold positions 0..n-1 and a value accumulator of vd.
func (s *attnScratch) grow(n, vd int) {
	if cap(s.scores) < n {
		c := max(n, 2*cap(s.scores))
		s.scores, s.ms, s.vs = make([]float32, c), make([]float32, c), make([]float32, c)
	}
	s.scores, s.ms, s.vs = s.scores[:n], s.ms[:n], s.vs[:n]
	if cap(s.acc) < vd {
		s.acc = make([]uint16, vd)
	}
	s.acc = s.acc[:vd]
}

// attendHead computes one head's attention output for a query at position pos over positions
// 0..pos: out = Σ_t softmax(q·K_t * scale) V_t, reading the KV head's slice at kOff/vOff.
func (c *kvCache) attendHead(l, pos int, q []float32, kOff, vOff int, scale float32, s *attnScratch, out []float32) {
	s.grow(pos+1, len(out))
	if c.typ == KVF16 {
		c.attendHeadF16(l, q, kOff, vOff, scale, s, out)
		return
	}
	hd := len(q)
	scores := s.scores
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

// attendHeadF16 is attendHead over the f16 cache (positions 0..len(s.scores)-1) with the
// numerics of llama.cpp's CPU flash-attention kernel, which its default configuration uses: a
// single pass with an online softmax (running maximum M and sum S) and the weighted sum of
// values accumulated in f16, rounded after every position. The query must already be rounded
// to f16. Matching this matters: for quantized weights the f16 rounding changes which way
// later activations round to 8 bits, and the logits move by ~0.1 when the accumulation
// differs.
//
// The pass is split in three without changing a single operation: all scores; then the
// running maximum, each position's rescale ms and weight vs, and the sum; then the value
// accumulation. The first two have no dependency from one position to the next, so the
// processor overlaps them; the third keeps the accumulator in registers where it can.
func (c *kvCache) attendHeadF16(l int, q []float32, kOff, vOff int, scale float32, s *attnScratch, out []float32) {
	hd, vd := len(q), len(out)
	keys, vals := c.k16[l], c.v16[l]
	scores, ms, vs := s.scores, s.ms, s.vs
	if !dotF16Rows(q, keys[kOff:], c.kDim, scale, scores) {
		for t := range scores {
			scores[t] = dotF16(q, keys[t*c.kDim+kOff:t*c.kDim+kOff+hd]) * scale
		}
	}
	var sum float32
	maxS := float32(math.Inf(-1))
	for t, sc := range scores {
		if sc > maxS {
			ms[t], vs[t] = exp32(maxS-sc), 1
			maxS = sc
		} else {
			ms[t], vs[t] = 1, exp32(sc-maxS)
		}
		sum = fma32(sum, ms[t], vs[t])
	}
	d := 0
	for ; d+64 <= vd; d += 64 {
		if !madF16Seq(out[d:d+64], vals[vOff+d:], c.vDim, ms, vs) {
			break
		}
	}
	if d < vd {
		acc := s.acc[:vd-d]
		clear(acc)
		for t := range scores {
			if t > 0 && ms[t] != 1 { // acc is zero at t == 0; a scale of 1 changes nothing
				scaleF16(acc, ms[t])
			}
			madF16(acc, vals[t*c.vDim+vOff+d:t*c.vDim+vOff+vd], vs[t])
		}
		for i, a := range acc {
			out[d+i] = quant.F16ToF32(a)
		}
	}
	inv := float32(0)
	if sum != 0 {
		inv = 1 / sum
	}
	for i := range out {
		out[i] *= inv
	}
}

// madF16Go is the portable form of madF16.
func madF16Go(acc, v []uint16, s float32) {
	v = v[:len(acc)]
	for d, a := range acc {
		acc[d] = quant.F32ToF16(fma32(quant.F16ToF32(v[d]), s, quant.F16ToF32(a)))
	}
}

// scaleF16Go is the portable form of scaleF16.
func scaleF16Go(acc []uint16, s float32) {
	for d, a := range acc {
		acc[d] = quant.F32ToF16(quant.F16ToF32(a) * s)
	}
}

// exp32 returns e^x rounded to float32. It is float32(math.Exp(float64(x))) computed about
// three times faster (the attention loop calls it once per position and head): x = (64k+j)
// ln2/64 + r with |r| <= ln2/128, e^x = 2^k * 2^(j/64) * e^r, e^r by a degree-5 polynomial. The
// float64 result is within a few float64 ulps of e^x, so its float32 rounding is that of the
// exact value except with probability ~1e-8 per call, the same as for math.Exp.
func exp32(x float32) float32 {
	switch {
	case x > 89: // e^89 > MaxFloat32
		return float32(math.Inf(1))
	case !(x > -104): // below half the smallest float32 subnormal; also -Inf and NaN
		if x != x {
			return x
		}
		return 0
	}
	xd := float64(x)
	const round = 0x1.8p52 // adding and subtracting rounds to an integer
	kd := (xd*(64/math.Ln2) + round) - round
	r := (xd - kd*ln2Hi64) - kd*ln2Lo64
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120)))))
	k := int64(kd)
	scale := math.Float64frombits(uint64(k>>6+1023) << 52)
	return float32(p * exp2Sixtyfourths[k&63] * scale)
}

// ln2/64 split so that k*ln2Hi64 is exact for the |k| < 2^20 exp32 uses.
const (
	ln2Hi64 = 6.93147180369123816490e-01 / 64
	ln2Lo64 = 1.90821492927058770002e-10 / 64
)

// exp2Sixtyfourths[j] = 2^(j/64).
var exp2Sixtyfourths = func() (t [64]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 64)
	}
	return t
}()

// fma32 returns a*b+c rounded once to float32 (as a fused multiply-add in float32 does, up to
// double rounding in rare ties).
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

func dotF32(a, b []float32) float32 {
	var s float32
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// dotF16Go is the portable form of dotF16.
func dotF16Go(a []float32, b []uint16) float32 {
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
