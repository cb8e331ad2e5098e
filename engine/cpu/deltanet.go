package cpu

import (
	"math"

	"github.com/vkllm/vkllm/engine/model"
)

// deltaScratch holds the Gated DeltaNet block's buffers for up to maxBatch tokens, and the
// gated attention's fused query and gate.
type deltaScratch struct {
	qkv   []float32 // the projection before the convolution: maxBatch × ConvDim
	mixed []float32 // after the convolution and SiLU; q and k then L2-normed
	z     []float32 // the output gate: maxBatch × ValueDim
	beta  []float32 // per token and value head: the write strength, sigmoid applied
	alpha []float32 // per token and value head: the decay's input, then the log-decay g
	out   []float32 // the heads' outputs: maxBatch × ValueDim
	qg    []float32 // gated attention: the query projection, each head's query then its gate
	gate  []float32 // gated attention: the output gates, maxBatch × QDim
}

func newDeltaScratch(h model.Hyperparameters) deltaScratch {
	p, b := h.SSM, maxBatch
	return deltaScratch{
		qkv:   make([]float32, b*p.ConvDim()),
		mixed: make([]float32, b*p.ConvDim()),
		z:     make([]float32, b*p.ValueDim()),
		beta:  make([]float32, b*p.VHeads),
		alpha: make([]float32, b*p.VHeads),
		out:   make([]float32, b*p.ValueDim()),
		qg:    make([]float32, b*2*h.QDim()),
		gate:  make([]float32, b*h.QDim()),
	}
}

// deltaNet is the Gated DeltaNet block with its pre-norm and residual (the linear-attention
// layers of qwen35 and qwen35moe), as llama.cpp computes it:
//
//	q, k, v = split(silu(conv(QKV · norm(x))))   causal convolution over the last ConvKernel tokens
//	q, k    = l2norm(q), l2norm(k)               per head
//	β       = sigmoid(Beta · norm(x))            per value head
//	g       = softplus(Alpha · norm(x) + dt_bias) · A   (A = -exp(A_log): g < 0)
//	S       = e^g S;  S += k (β (v - Sᵀk))ᵀ       the delta rule, per value head
//	o       = Sᵀq / sqrt(StateSize)
//	x      += Out · (rmsnorm(o) · silu(Z · norm(x)))   per head
//
// Value head h reads query and key head h mod KHeads (the converted GGUFs order the value heads
// so). The state S of head h is StateSize×StateSize, stored transposed (row j holds S[·][j]).
//
// The recurrence runs token by token, for a prompt too: the state is carried across the batch
// in order, exactly as a one-token-at-a-time decode would. llama.cpp's prompt path computes the
// same sums chunk-parallel; the two agree to float rounding.
func (r *Runner) deltaNet(li int, l *model.Layer, n int) {
	h, p, d, s := r.h, r.h.SSM, l.DeltaNet, &r.dn
	cd, kd, vd, vh, S, K := p.ConvDim(), p.KeyDim(), p.ValueDim(), p.VHeads, p.StateSize, p.ConvKernel
	st := r.rec.layer(li)
	r.norm(r.xb, r.x, l.AttnNorm, n)
	xb := r.xb[:n*h.Dim]
	r.matmul(s.qkv[:n*cd], d.QKV, xb, n)
	r.matmulSameInput(s.z[:n*vd], d.Z, xb, n)
	r.matmulSameInput(s.beta[:n*vh], d.Beta, xb, n)
	r.matmulSameInput(s.alpha[:n*vh], d.Alpha, xb, n)

	// the causal convolution, channel by channel: the state holds each channel's last K-1
	// inputs, oldest first, and tap t of the kernel multiplies the input K-1-t tokens back
	conv := st.conv
	r.pool.parallel(cd, 256, func(_, lo, hi int) {
		for c := lo; c < hi; c++ {
			taps := d.Conv[c*K : (c+1)*K]
			for i := 0; i < n; i++ {
				x := s.qkv[i*cd+c]
				var sum float32
				for t := 0; t < K-1; t++ {
					sum += float32(conv[t*cd+c] * taps[t])
				}
				sum += float32(x * taps[K-1])
				for t := 0; t < K-2; t++ {
					conv[t*cd+c] = conv[(t+1)*cd+c]
				}
				conv[(K-2)*cd+c] = x
				s.mixed[i*cd+c] = silu(sum)
			}
		}
	})
	for i := 0; i < n; i++ {
		row := s.mixed[i*cd : (i+1)*cd]
		for hd := 0; hd < 2*kd; hd += S { // every query head, then every key head
			l2Norm(row[hd:hd+S], h.NormEps)
		}
		for j := 0; j < vh; j++ {
			s.beta[i*vh+j] = sigmoid(s.beta[i*vh+j])
			s.alpha[i*vh+j] = softplus(s.alpha[i*vh+j]+d.DtBias.Values[j]) * d.A.Values[j]
		}
	}

	scale := 1 / sqrt32(float32(S))
	r.pool.parallel(vh, 1, func(_, lo, hi int) {
		for hh := lo; hh < hi; hh++ {
			kh := hh % p.KHeads
			state := st.ssm[hh*S*S : (hh+1)*S*S]
			for i := 0; i < n; i++ {
				row := s.mixed[i*cd : (i+1)*cd]
				q, k := row[kh*S:(kh+1)*S], row[kd+kh*S:kd+(kh+1)*S]
				v := row[2*kd+hh*S : 2*kd+(hh+1)*S]
				decay := float32(math.Exp(float64(s.alpha[i*vh+hh])))
				beta := s.beta[i*vh+hh]
				out := s.out[i*vd+hh*S : i*vd+(hh+1)*S]
				// rows j are independent: decay, the delta of v_j, the rank-1 update, the output
				for j := 0; j < S; j++ {
					sj := state[j*S : (j+1)*S]
					for x := range sj {
						sj[x] *= decay
					}
					delta := (v[j] - dotF32(sj, k)) * beta
					axpy(sj, delta, k)
					out[j] = dotF32(sj, q) * scale
				}
			}
		}
	})

	// the gated RMS norm of every output head, then the output projection and the residual
	for i := 0; i < n*vd; i += S {
		o := s.out[i : i+S]
		rmsNorm(o, o, d.Norm.Values, h.NormEps)
		for j, z := range s.z[i : i+S] {
			o[j] *= silu(z)
		}
	}
	r.matmul(r.xb[:n*h.Dim], d.Out, s.out[:n*vd], n)
	add(r.x[:n*h.Dim], r.xb[:n*h.Dim])
}

// gatedAttention is the attention block of the Gated DeltaNet hybrids with its pre-norm and
// residual: Q's projection yields each head's query and an output gate; the queries and keys
// are RMS-normed per head and rotated (NEOX, over Rope.Dims of the head's dimensions); the
// attention's output is multiplied by sigmoid(gate) before the output projection.
func (r *Runner) gatedAttention(li int, l *model.Layer, n, pos int) {
	h, s := r.h, &r.dn
	qd, hd := h.QDim(), h.HeadDim
	r.norm(r.xb, r.x, l.AttnNorm, n)
	xb := r.xb[:n*h.Dim]
	r.matmul(s.qg[:n*2*qd], l.Q, xb, n)
	r.matmulSameInput(r.k[:n*h.KDim()], l.K, xb, n)
	r.matmulSameInput(r.v[:n*h.VDim()], l.V, xb, n)
	for i := 0; i < n; i++ {
		for head := 0; head < h.Heads; head++ {
			src := s.qg[i*2*qd+head*2*hd:]
			copy(r.q[i*qd+head*hd:i*qd+(head+1)*hd], src[:hd])
			copy(s.gate[i*qd+head*hd:i*qd+(head+1)*hd], src[hd:2*hd])
		}
	}
	rmsNormHeads(r.q[:n*qd], l.QNorm.Values, hd, h.NormEps)
	rmsNormHeads(r.k[:n*h.KDim()], l.KNorm.Values, hd, h.NormEps)
	r.ropeQK(n, pos)
	r.attend(li, n, pos)
	att := r.att[:n*qd]
	for i, g := range s.gate[:n*qd] {
		att[i] *= sigmoid(g)
	}
	r.matmul(r.xb[:n*h.Dim], l.O, att, n)
	add(r.x[:n*h.Dim], r.xb[:n*h.Dim])
}

// l2Norm scales x to unit length: x / max(|x|, eps), the sum of squares in double as ggml's.
func l2Norm(x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	scale := 1 / max(float32(math.Sqrt(float64(float32(sum)))), eps) // sqrtf of the sum rounded to float
	for i := range x {
		x[i] *= scale
	}
}

// silu is x·sigmoid(x) = x / (1 + e^-x), as swiglu computes it.
func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// softplus is ln(1 + e^x), x itself above 20 (as ggml's).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + float32(math.Exp(float64(x))))))
}
