package cpu

import (
	"math"

	"github.com/vkllm/vkllm/engine/quant"
)

// The kernels below work on plain float32 slices, one token's vector at a time. They follow the
// formulas llama.cpp's CPU backend evaluates (including where it sums in double precision), so
// the logits agree to float rounding noise.

// rmsNorm sets out = x / sqrt(mean(x²) + eps) * weight. out may alias x.
func rmsNorm(out, x, weight []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v) // squared in float32, summed in double, as llama.cpp does
	}
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		out[i] = v * scale * weight[i]
	}
}

// rmsNormHeads applies rmsNorm with the same weight to each consecutive headDim slice of x.
func rmsNormHeads(x, weight []float32, headDim int, eps float32) {
	for h := 0; h+headDim <= len(x); h += headDim {
		rmsNorm(x[h:h+headDim], x[h:h+headDim], weight, eps)
	}
}

// addBias adds b to every len(b)-long row of x; an empty b (no bias) changes nothing.
func addBias(x, b []float32) {
	if len(b) == 0 {
		return
	}
	for r := 0; r+len(b) <= len(x); r += len(b) {
		row := x[r : r+len(b)]
		for i, v := range b {
			row[i] += v
		}
	}
}

// add sets dst += src.
func add(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}

// swiglu sets gate = silu(gate) * up, silu(x) = x / (1 + e^-x).
func swiglu(gate, up []float32) {
	for i, g := range gate {
		gate[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// softmax turns x into probabilities in place (max-subtracted, summed in double precision).
func softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - m)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// rope rotates query and key heads by position. The angles follow llama.cpp's float32
// recurrence exactly (theta_0 = pos, theta_{i+1} = theta_i * base^(-2/dims), times the frequency
// scale and divided by the frequency factor), because for quantized models a last-bit difference
// here decides how later activations round to 8 bits.
type rope struct {
	dims       int       // rotated dimensions per head (the rest pass through)
	neox       bool      // NEOX pairs (i, i+dims/2); otherwise adjacent pairs (2i, 2i+1)
	thetaScale float32   // base^(-2/dims)
	freqScale  float32   // 1/linear scaling factor
	factors    []float32 // per-pair divisors (llama 3.1 rope_freqs), nil = 1
	still      []bool    // pairs held at position 0 (M-RoPE's fourth section, for text), nil = none
	cos, sin   []float32 // scratch: one position's angles
}

func newRope(dims int, base, scale float32, neox bool, factors []float32) rope {
	exp := float32(-2) / float32(dims)
	return rope{
		dims:       dims,
		neox:       neox,
		thetaScale: float32(math.Pow(float64(base), float64(exp))),
		freqScale:  scale,
		factors:    factors,
		cos:        make([]float32, dims/2),
		sin:        make([]float32, dims/2),
	}
}

// angles fills cos and sin for position pos.
func (r *rope) angles(pos int) {
	theta := float32(pos)
	for i := range r.cos {
		ff := float32(1)
		if i < len(r.factors) && r.factors[i] != 0 {
			ff = r.factors[i]
		}
		t := r.freqScale * (theta / ff)
		r.cos[i] = float32(math.Cos(float64(t)))
		r.sin[i] = float32(math.Sin(float64(t)))
		if i < len(r.still) && r.still[i] {
			r.cos[i], r.sin[i] = 1, 0
		}
		theta *= r.thetaScale
	}
}

// apply rotates every headDim-long head of x for position pos.
func (r *rope) apply(x []float32, headDim, pos int) {
	r.angles(pos)
	half := r.dims / 2
	for h := 0; h+headDim <= len(x); h += headDim {
		head := x[h : h+headDim]
		for i := 0; i < half; i++ {
			c, s := r.cos[i], r.sin[i]
			a, b := 2*i, 2*i+1
			if r.neox {
				a, b = i, i+half
			}
			x0, x1 := head[a], head[b]
			// the conversions keep the compiler from fusing into FMAs (GOAMD64=v3), which
			// llama.cpp's build does not do here
			head[a] = float32(x0*c) - float32(x1*s)
			head[b] = float32(x0*s) + float32(x1*c)
		}
	}
}

// roundF16 rounds every value to the nearest float16, as llama.cpp does to a vector it
// multiplies with an f16 matrix (the KV cache, f16 weights).
func roundF16(x []float32) {
	for i, v := range x {
		x[i] = quant.F16ToF32(quant.F32ToF16(v))
	}
}
