package cpu

// forwardQwen3MoE is qwen3's attention block followed, in every layer, by the
// mixture-of-experts FFN in place of the dense one (Qwen3-30B-A3B):
//
//	x += O · attention(rope(qnorm(Q·norm(x))), rope(knorm(K·norm(x))), V·norm(x))
//	x += Σ_{e in top-k(router · norm(x))} w_e · down_e(silu(gate_e · norm(x)) * (up_e · norm(x)))
func (r *Runner) forwardQwen3MoE(n, pos, layers int) {
	for li := range layers {
		l := &r.m.Layers[li]
		r.attentionQwen3(li, l, n, pos)
		r.moe(l, n)
	}
}
