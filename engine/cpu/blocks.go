package cpu

import (
	"math"

	"github.com/vkllm/vkllm/engine/model"
)

// The blocks every architecture's forward pass is built from. They work on the first n tokens
// of the batch buffers.

// norm sets dst = rmsNorm(src) * w for each of n rows of Dim.
func (r *Runner) norm(dst, src []float32, w model.Vector, n int) {
	dim := r.h.Dim
	for i := 0; i < n; i++ {
		rmsNorm(dst[i*dim:(i+1)*dim], src[i*dim:(i+1)*dim], w.Values, r.h.NormEps)
	}
}

// qkv projects the normed input xb to queries, keys and values.
func (r *Runner) qkv(l *model.Layer, n int) {
	r.matmul(r.q[:n*r.h.QDim()], l.Q, r.xb[:n*r.h.Dim], n)
	r.matmulSameInput(r.k[:n*r.h.KDim()], l.K, r.xb[:n*r.h.Dim], n)
	r.matmulSameInput(r.v[:n*r.h.VDim()], l.V, r.xb[:n*r.h.Dim], n)
}

// ropeQK rotates the queries and keys of token i by its position pos+i.
func (r *Runner) ropeQK(n, pos int) {
	qd, kd, hd := r.h.QDim(), r.h.KDim(), r.h.HeadDim
	for i := 0; i < n; i++ {
		r.rope.apply(r.q[i*qd:(i+1)*qd], hd, pos+i)
		r.rope.apply(r.k[i*kd:(i+1)*kd], hd, pos+i)
	}
}

// attention stores the batch's keys and values in layer li's cache, attends every query head
// over its KV head (grouped-query: Heads/HeadsKV query heads share one KV head) causally, and
// adds the output projection to the residual stream x.
func (r *Runner) attention(li int, l *model.Layer, n, pos int) {
	r.attend(li, n, pos)
	outDim := r.h.Heads * r.h.ValueDim
	r.matmul(r.xb[:n*r.h.Dim], l.O, r.att[:n*outDim], n)
	add(r.x[:n*r.h.Dim], r.xb[:n*r.h.Dim])
}

// attend is attention without the output projection: the heads' outputs are left in att.
func (r *Runner) attend(li, n, pos int) {
	h := r.h
	kd, vd, qd := h.KDim(), h.VDim(), h.QDim()
	for i := 0; i < n; i++ {
		r.kv.store(li, pos+i, r.k[i*kd:(i+1)*kd], r.v[i*vd:(i+1)*vd])
	}
	if r.kv.typ == KVF16 {
		// llama.cpp multiplies the f16 cache with f16-rounded queries
		roundF16(r.q[:n*qd])
	}
	group := h.Heads / h.HeadsKV
	outDim := h.Heads * h.ValueDim
	perJob := (pos + n) * (h.HeadDim + h.ValueDim) // multiply-adds of one head's attention
	r.pool.parallel(n*h.Heads, max(1, minWorkPerChunk/perJob), func(w, lo, hi int) {
		scratch := &r.attnScratch[w]
		for job := lo; job < hi; job++ {
			i, head := job/h.Heads, job%h.Heads
			kvh := head / group
			q := r.q[i*qd+head*h.HeadDim : i*qd+(head+1)*h.HeadDim]
			out := r.att[i*outDim+head*h.ValueDim : i*outDim+(head+1)*h.ValueDim]
			r.kv.attendHead(li, pos+i, q, kvh*h.HeadDim, kvh*h.ValueDim, r.scale, scratch, out)
		}
	})
}

// ffn is the SwiGLU feed-forward block with its pre-norm and residual:
// x += down(silu(gate(norm(x))) * up(norm(x))).
func (r *Runner) ffn(l *model.Layer, n int) {
	dim, ff := r.h.Dim, r.h.FFN
	r.norm(r.xb, r.x, l.FFNNorm, n)
	r.matmul(r.gate[:n*ff], l.Gate, r.xb[:n*dim], n)
	r.matmulSameInput(r.up[:n*ff], l.Up, r.xb[:n*dim], n)
	r.pool.parallel(n*ff, 4096, func(_, lo, hi int) { swiglu(r.gate[lo:hi], r.up[lo:hi]) })
	r.matmul(r.xb[:n*dim], l.Down, r.gate[:n*ff], n)
	add(r.x[:n*dim], r.xb[:n*dim])
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }
