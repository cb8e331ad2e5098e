package cpu

// forwardQwen2MoE is qwen2's attention block followed, in every layer, by the
// mixture-of-experts FFN with its shared expert (Qwen1.5-MoE, Qwen2-57B-A14B):
//
//	x += O · attention(rope(Q·norm(x) + bq), rope(K·norm(x) + bk), V·norm(x) + bv)
//	x += Σ_{e in top-k} p_e · expert_e(norm(x)) + sigmoid(g · norm(x)) · shared(norm(x))
//
// (the router's probabilities p are not renormalised over the selected experts).
func (r *Runner) forwardQwen2MoE(n, pos, layers int) {
	for li := range layers {
		l := &r.m.Layers[li]
		r.attentionQwen2(li, l, n, pos)
		r.moe(l, n)
	}
}
