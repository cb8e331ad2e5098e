package cpu

// forwardQwen3 is llama's block with an RMSNorm over every query and key head before RoPE
// (NEOX, chosen at load).
func (r *Runner) forwardQwen3(n, pos, layers int) {
	h := r.h
	for li := range layers {
		l := &r.m.Layers[li]
		r.norm(r.xb, r.x, l.AttnNorm, n)
		r.qkv(l, n)
		rmsNormHeads(r.q[:n*h.QDim()], l.QNorm.Values, h.HeadDim, h.NormEps)
		rmsNormHeads(r.k[:n*h.KDim()], l.KNorm.Values, h.HeadDim, h.NormEps)
		r.ropeQK(n, pos)
		r.attention(li, l, n, pos)
		r.ffn(l, n)
	}
}
