package cpu

// forwardQwen35MoE is qwen35's layers with, in every layer, the mixture-of-experts FFN and its
// shared expert under a sigmoid gate in place of the dense one (Qwen3.5 MoE):
//
//	x += deltaNet(norm(x))  or  x += O · (attention(...) * sigmoid(gate))
//	x += Σ_{e in top-k} w_e · expert_e(norm(x)) + sigmoid(g · norm(x)) · shared(norm(x))
//
// (softmax routing, the selected weights renormalised to sum 1).
func (r *Runner) forwardQwen35MoE(n, pos, layers int) {
	for li := range layers {
		l := &r.m.Layers[li]
		if l.DeltaNet != nil {
			r.deltaNet(li, l, n)
		} else {
			r.gatedAttention(li, l, n, pos)
		}
		r.moe(l, n)
	}
}
