package cpu

// forwardQwen35 runs the Gated DeltaNet hybrid (Qwen3.5 dense): each layer is either a Gated
// DeltaNet block (three of every four in the published models) or gated attention, and then a
// dense SwiGLU FFN whose pre-norm is the model's post_attention_norm:
//
//	x += deltaNet(norm(x))  or  x += O · (attention(...) * sigmoid(gate))
//	x += down · (silu(gate · norm(x)) * (up · norm(x)))
func (r *Runner) forwardQwen35(n, pos, layers int) {
	for li := range layers {
		l := &r.m.Layers[li]
		if l.DeltaNet != nil {
			r.deltaNet(li, l, n)
		} else {
			r.gatedAttention(li, l, n, pos)
		}
		r.ffn(l, n)
	}
}
