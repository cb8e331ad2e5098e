package cpu

import "github.com/vkllm/vkllm/engine/model"

// forwardQwen2 is llama's block with biases added to the Q, K and V projections (and NEOX RoPE,
// chosen at load).
func (r *Runner) forwardQwen2(n, pos, layers int) {
	for li := range layers {
		l := &r.m.Layers[li]
		r.attentionQwen2(li, l, n, pos)
		r.ffn(l, n)
	}
}

// attentionQwen2 is qwen2's attention block with its pre-norm and residual: biases on the Q, K
// and V projections (where the model has them) before RoPE.
func (r *Runner) attentionQwen2(li int, l *model.Layer, n, pos int) {
	h := r.h
	r.norm(r.xb, r.x, l.AttnNorm, n)
	r.qkv(l, n)
	addBias(r.q[:n*h.QDim()], l.QBias.Values)
	addBias(r.k[:n*h.KDim()], l.KBias.Values)
	addBias(r.v[:n*h.VDim()], l.VBias.Values)
	r.ropeQK(n, pos)
	r.attention(li, l, n, pos)
}
