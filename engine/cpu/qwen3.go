package cpu

import "github.com/vkllm/vkllm/engine/model"

// forwardQwen3 is llama's block with an RMSNorm over every query and key head before RoPE
// (NEOX, chosen at load).
func (r *Runner) forwardQwen3(n, pos, layers int) {
	for li := range layers {
		l := &r.m.Layers[li]
		r.attentionQwen3(li, l, n, pos)
		r.ffn(l, n)
	}
}

// attentionQwen3 is qwen3's attention block with its pre-norm and residual: the Q and K heads
// are RMS-normed (one weight per head dimension) before RoPE.
func (r *Runner) attentionQwen3(li int, l *model.Layer, n, pos int) {
	h := r.h
	r.norm(r.xb, r.x, l.AttnNorm, n)
	r.qkv(l, n)
	rmsNormHeads(r.q[:n*h.QDim()], l.QNorm.Values, h.HeadDim, h.NormEps)
	rmsNormHeads(r.k[:n*h.KDim()], l.KNorm.Values, h.HeadDim, h.NormEps)
	r.ropeQK(n, pos)
	r.attention(li, l, n, pos)
}
