package cpu

// forwardLlama runs blocks 0..layers-1 of the llama stack (llama 2/3, Mistral, TinyStories,
// SmolLM) over the n tokens embedded in x, at positions pos..pos+n-1:
//
//	x += O · attention(rope(Q·norm(x)), rope(K·norm(x)), V·norm(x))
//	x += down · (silu(gate · norm(x)) * (up · norm(x)))
func (r *Runner) forwardLlama(n, pos, layers int) {
	for li := range layers {
		l := &r.m.Layers[li]
		r.norm(r.xb, r.x, l.AttnNorm, n)
		r.qkv(l, n)
		r.ropeQK(n, pos)
		r.attention(li, l, n, pos)
		r.ffn(l, n)
	}
}
