package cpu

// forwardLlama runs the llama block stack (llama 2/3, Mistral, TinyStories, SmolLM) over the n
// tokens embedded in x, at positions pos..pos+n-1:
//
//	x += O · attention(rope(Q·norm(x)), rope(K·norm(x)), V·norm(x))
//	x += down · (silu(gate · norm(x)) * (up · norm(x)))
func (r *Runner) forwardLlama(n, pos int) {
	for li := range r.m.Layers {
		l := &r.m.Layers[li]
		r.norm(r.xb, r.x, l.AttnNorm, n)
		r.qkv(l, n)
		r.ropeQK(n, pos)
		r.attention(li, l, n, pos)
		r.ffn(l, n)
	}
}
