package cpu

import (
	"math"
	"slices"

	"github.com/vkllm/vkllm/engine/model"
)

// moeScratch holds the mixture-of-experts block's buffers for up to maxBatch tokens.
type moeScratch struct {
	logits   []float32 // router logits, token-major: maxBatch × Experts
	selected []int     // per token its Used experts, best first
	weights  []float32 // per token the selected experts' weights, in the same order
	rows     []int     // the (token, slot) pairs routed to the expert in progress: token*Used+slot
	in       []float32 // their normed inputs, gathered
	down     []float32 // their expert outputs
	out      []float32 // per (token, slot) the expert's output, token-major: maxBatch × Used × Dim
	shared   []float32 // the shared expert's output: maxBatch × Dim
	gating   []float32 // the shared expert's gate logit per token
}

func newMoEScratch(h model.Hyperparameters) moeScratch {
	p, b, dim := h.MoE, maxBatch, h.Dim
	return moeScratch{
		logits:   make([]float32, b*p.Experts),
		selected: make([]int, b*p.Used),
		weights:  make([]float32, b*p.Used),
		rows:     make([]int, 0, b*p.Used),
		in:       make([]float32, b*dim),
		down:     make([]float32, b*dim),
		out:      make([]float32, b*p.Used*dim),
		shared:   make([]float32, b*dim),
		gating:   make([]float32, b),
	}
}

// moe is the mixture-of-experts FFN block with its pre-norm and residual, as llama.cpp's
// build_moe_ffn computes it for the qwen3moe family:
//
//	p = gating(router · norm(x))          softmax over all experts (or the GGUF's gating)
//	S = the Used experts of largest p     ties to the lower index
//	w = p[S] / max(Σ p[S], 2^-14)          when the model renormalises; times its scale
//	x += Σ_{e in S, best first} w_e · down_e(silu(gate_e · norm(x)) * (up_e · norm(x)))
//	     (+ sigmoid(g · norm(x)) · shared FFN(norm(x)) where the model has a shared expert)
//
// The tokens of the batch routed to one expert are multiplied together, so each expert's rows
// are read once per batch; every product is the one a single token would get.
func (r *Runner) moe(l *model.Layer, n int) {
	dim, p, mo, s := r.h.Dim, r.h.MoE, l.MoE, &r.moeS
	k, ne := p.Used, p.Experts
	r.norm(r.xb, r.x, l.FFNNorm, n)
	r.matmul(s.logits[:n*ne], mo.Router, r.xb[:n*dim], n)
	for i := 0; i < n; i++ {
		if i == n-1 && k < ne { // the batch's last token: RouterMargin
			r.routerMargin = min(r.routerMargin, routerMargin(s.logits[i*ne:(i+1)*ne], k))
		}
		route(s.logits[i*ne:(i+1)*ne], p, s.selected[i*k:(i+1)*k], s.weights[i*k:(i+1)*k])
	}
	if l := r.routedLayers; l < len(r.routing) {
		r.routing[l] = append(r.routing[l], s.selected[:n*k]...)
	} else {
		r.routing = append(r.routing, slices.Clone(s.selected[:n*k]))
	}
	r.routedLayers++
	for e := 0; e < ne; e++ {
		s.rows = s.rows[:0]
		for j, sel := range s.selected[:n*k] {
			if sel == e {
				s.rows = append(s.rows, j)
			}
		}
		m := len(s.rows)
		if m == 0 {
			continue
		}
		for g, j := range s.rows {
			i := j / k
			copy(s.in[g*dim:(g+1)*dim], r.xb[i*dim:(i+1)*dim])
		}
		r.swigluFFN(s.down[:m*dim], mo.Gate.Matrices[e], mo.Up.Matrices[e], mo.Down.Matrices[e], s.in[:m*dim], m)
		for g, j := range s.rows {
			copy(s.out[j*dim:(j+1)*dim], s.down[g*dim:(g+1)*dim])
		}
	}
	// each expert's output times its weight, then summed in the order of selection
	for i := 0; i < n; i++ {
		acc := r.xb[i*dim : (i+1)*dim]
		for j := 0; j < k; j++ {
			w, o := s.weights[i*k+j], s.out[(i*k+j)*dim:(i*k+j+1)*dim]
			if j == 0 {
				for d, v := range o {
					acc[d] = v * w
				}
				continue
			}
			for d, v := range o {
				acc[d] += float32(v * w) // the conversion keeps the product rounded, as ggml's mul then add
			}
		}
	}
	if sh := mo.Shared; sh != nil {
		// the normed input is gone from xb; norm again into in (the same values)
		r.norm(s.in, r.x, l.FFNNorm, n)
		r.swigluFFN(s.shared[:n*dim], sh.Gate, sh.Up, sh.Down, s.in[:n*dim], n)
		r.matmul(s.gating[:n], sh.Gating, s.in[:n*dim], n)
		for i := 0; i < n; i++ {
			g := sigmoid(s.gating[i])
			acc, o := r.xb[i*dim:(i+1)*dim], s.shared[i*dim:(i+1)*dim]
			for d, v := range o {
				acc[d] += float32(v * g)
			}
		}
	}
	add(r.x[:n*dim], r.xb[:n*dim])
}

// swigluFFN sets out = down · (silu(gate · x) * (up · x)) for the m rows of x, using the
// runner's gate and up buffers.
func (r *Runner) swigluFFN(out []float32, gate, up, down model.Matrix, x []float32, m int) {
	ff := gate.Rows
	r.matmul(r.gate[:m*ff], gate, x, m)
	r.matmulSameInput(r.up[:m*ff], up, x, m)
	r.pool.parallel(m*ff, 4096, func(_, lo, hi int) { swiglu(r.gate[lo:hi], r.up[lo:hi]) })
	r.matmul(out, down, r.gate[:m*ff], m)
}

// route turns one token's router logits into its selected experts (best first) and their
// weights, following p's gating, normalisation and scale. logits is overwritten.
func route(logits []float32, p model.MoEParams, selected []int, weights []float32) {
	probs := logits
	switch p.Gating {
	case model.GatingSigmoid:
		for i, v := range probs {
			probs[i] = sigmoid(v)
		}
	case model.GatingSoftmaxSelected:
		// select on the logits, softmax over the selected below
	default:
		softmax(probs)
	}
	topK(probs, selected)
	for j, e := range selected {
		weights[j] = probs[e]
	}
	if p.Gating == model.GatingSoftmaxSelected {
		softmax(weights)
	}
	if p.NormWeights {
		var sum float64
		for _, w := range weights {
			sum += float64(w)
		}
		// llama.cpp clamps the sum to the smallest normal f16 before dividing
		total := max(float32(sum), 6.103515625e-5)
		for j := range weights {
			weights[j] /= total
		}
	}
	if p.WeightsScale != 0 && p.WeightsScale != 1 {
		for j := range weights {
			weights[j] *= p.WeightsScale
		}
	}
}

// topK writes the indices of the len(selected) largest values of v into selected, largest
// first; equal values go to the lower index first. NaN is never selected over a number.
func topK(v []float32, selected []int) {
	for j := range selected {
		best := -1
		for i, x := range v {
			taken := false
			for _, s := range selected[:j] {
				if s == i {
					taken = true
					break
				}
			}
			if taken {
				continue
			}
			if best < 0 || x > v[best] || (v[best] != v[best] && x == x) {
				best = i
			}
		}
		selected[j] = best
	}
}

// routerMargin is how far one token's routing was from choosing another expert: its k-th
// largest router logit less the (k+1)-th (every gating selects in the logits' order), NaN
// counted as the smallest.
func routerMargin(logits []float32, k int) float32 {
	var top [65]float32 // the k+1 largest, descending (k <= 64: the routers there are)
	n := 0
	if k+1 > len(top) {
		return float32(math.Inf(1))
	}
	for _, v := range logits {
		if v != v {
			v = float32(math.Inf(-1))
		}
		if n == k+1 && v <= top[k] {
			continue
		}
		j := min(n, k)
		for j > 0 && top[j-1] < v {
			top[j] = top[j-1]
			j--
		}
		top[j] = v
		n = min(n+1, k+1)
	}
	return top[k-1] - top[k]
}

// sigmoid is 1/(1+e^-x) in float32, as ggml's.
func sigmoid(x float32) float32 { return 1 / (1 + float32(math.Exp(float64(-x)))) }
