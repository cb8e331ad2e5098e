package vulkan

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// hostPart is the CPU side of a split: the token embedding, blocks 0..layers-1 and, when the
// device does not hold them, the final norm and the output head. It evaluates the llama block
// with the CPU reference's numerics (engine/cpu): every matmul input rounded to the weight's
// activation layout (quant.QuantizeActivation: f16, Q8_0, Q8_1 or Q8_K), an f16 KV cache read
// with f16-rounded queries and an online softmax whose value sum accumulates in f16, and
// llama.cpp's float32 rope recurrence. (engine/cpu exports no block-level entry point; when it
// does, this type should call it instead.)
type hostPart struct {
	m       *model.Model
	h       model.Hyperparameters
	layers  int // blocks run here: 0..layers-1
	ctx     int
	threads int
	kc, vc  [][]uint16 // per host layer: ctx rows of KDim / VDim f16 values

	// activations of up to hostBatch tokens, token-major
	xn, q, k, v, att, gate, up, tmp []float32
	xq                              [][]byte // each token's matmul input in the weight's activation layout
	cos, sin                        []float32
}

// hostBatch is the number of tokens whose matmuls share one pass over the weights.
const hostBatch = 32

func newHostPart(m *model.Model, layers, ctx, threads int) *hostPart {
	h := m.Hyper
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &hostPart{m: m, h: h, layers: layers, ctx: ctx, threads: threads}
	for i := 0; i < layers; i++ {
		p.kc = append(p.kc, make([]uint16, ctx*h.KDim()))
		p.vc = append(p.vc, make([]uint16, ctx*h.VDim()))
	}
	b := hostBatch
	p.xn = make([]float32, b*h.Dim)
	p.q = make([]float32, b*h.QDim())
	p.k = make([]float32, b*h.KDim())
	p.v = make([]float32, b*h.VDim())
	p.att = make([]float32, b*h.Heads*h.ValueDim)
	p.gate = make([]float32, b*h.FFN)
	p.up = make([]float32, b*h.FFN)
	p.tmp = make([]float32, b*h.Dim)
	p.xq = make([][]byte, b)
	rd := h.Rope.Dims
	if rd == 0 {
		rd = h.HeadDim
	}
	p.cos = make([]float32, rd/2)
	p.sin = make([]float32, rd/2)
	return p
}

// forward embeds tokens at positions pos.. and runs the host blocks over them, hostBatch
// tokens at a time, returning the residual stream after them (len(tokens) × dim, token-major).
func (p *hostPart) forward(tokens []int, pos int) ([]float32, error) {
	dim := p.h.Dim
	out := make([]float32, len(tokens)*dim)
	e := p.m.TokenEmbd
	for i, id := range tokens {
		if err := quant.Dequantize(e.Type, e.Row(id), out[i*dim:(i+1)*dim]); err != nil {
			return nil, fmt.Errorf("embed token %d from %q: %w", id, e.Name, err)
		}
	}
	for b0 := 0; b0 < len(tokens); b0 += hostBatch {
		n := min(hostBatch, len(tokens)-b0)
		x := out[b0*dim : (b0+n)*dim]
		for li := 0; li < p.layers; li++ {
			p.block(li, x, n, pos+b0)
		}
	}
	return out, nil
}

// block runs layer li on the residual stream x of n tokens at positions pos..:
//
//	x += O · attention(rope(Q·norm(x)), rope(K·norm(x)), V·norm(x))
//	x += down · (silu(gate · norm(x)) * (up · norm(x)))
func (p *hostPart) block(li int, x []float32, n, pos int) {
	h, l := p.h, &p.m.Layers[li]
	dim, qd, kd, vd, ff := h.Dim, h.QDim(), h.KDim(), h.VDim(), h.FFN
	for i := 0; i < n; i++ {
		rmsNormF32(p.xn[i*dim:(i+1)*dim], x[i*dim:(i+1)*dim], l.AttnNorm.Values, h.NormEps)
	}
	p.matmul(p.q[:n*qd], l.Q, p.xn[:n*dim], n)
	p.matmul(p.k[:n*kd], l.K, p.xn[:n*dim], n)
	p.matmul(p.v[:n*vd], l.V, p.xn[:n*dim], n)
	for i := 0; i < n; i++ {
		p.angles(pos + i)
		p.rope(p.q[i*qd : (i+1)*qd])
		p.rope(p.k[i*kd : (i+1)*kd])
		for j, v := range p.k[i*kd : (i+1)*kd] {
			p.kc[li][(pos+i)*kd+j] = quant.F32ToF16(v)
		}
		for j, v := range p.v[i*vd : (i+1)*vd] {
			p.vc[li][(pos+i)*vd+j] = quant.F32ToF16(v)
		}
	}
	for i, v := range p.q[:n*qd] {
		p.q[i] = quant.F16ToF32(quant.F32ToF16(v)) // the f16 cache is read with f16-rounded queries
	}
	group, ad := h.Heads/h.HeadsKV, h.Heads*h.ValueDim
	p.parallel(n*h.Heads, max(1, (1<<15)/((pos+n)*(h.HeadDim+h.ValueDim))), func(lo, hi int) {
		acc := make([]uint16, h.ValueDim)
		for job := lo; job < hi; job++ {
			i, head := job/h.Heads, job%h.Heads
			kvh := head / group
			q := p.q[i*qd+head*h.HeadDim : i*qd+(head+1)*h.HeadDim]
			out := p.att[i*ad+head*h.ValueDim : i*ad+(head+1)*h.ValueDim]
			p.attend(li, pos+i, q, kvh*h.HeadDim, kvh*h.ValueDim, acc, out)
		}
	})
	p.matmul(p.tmp[:n*dim], l.O, p.att[:n*ad], n)
	addF32(x, p.tmp[:n*dim])
	for i := 0; i < n; i++ {
		rmsNormF32(p.xn[i*dim:(i+1)*dim], x[i*dim:(i+1)*dim], l.FFNNorm.Values, h.NormEps)
	}
	p.matmul(p.gate[:n*ff], l.Gate, p.xn[:n*dim], n)
	p.matmul(p.up[:n*ff], l.Up, p.xn[:n*dim], n)
	for i, g := range p.gate[:n*ff] {
		p.gate[i] = g / (1 + float32(math.Exp(float64(-g)))) * p.up[i]
	}
	p.matmul(p.tmp[:n*dim], l.Down, p.gate[:n*ff], n)
	addF32(x, p.tmp[:n*dim])
}

// attend is one query head over positions 0..pos of layer li's f16 cache: a single pass with
// a running maximum and sum, the weighted sum of values kept in f16.
func (p *hostPart) attend(li, pos int, q []float32, kOff, vOff int, acc []uint16, out []float32) {
	h := p.h
	kd, vd := h.KDim(), h.VDim()
	scale := float32(1 / math.Sqrt(float64(h.HeadDim)))
	acc = acc[:len(out)]
	clear(acc)
	var sum float32
	best := float32(math.Inf(-1))
	for t := 0; t <= pos; t++ {
		krow := p.kc[li][t*kd+kOff : t*kd+kOff+len(q)]
		var dot float64
		for i, qv := range q {
			dot += float64(qv * quant.F16ToF32(krow[i]))
		}
		s := float32(dot) * scale
		ms, vs := float32(1), float32(1)
		if s > best {
			ms = float32(math.Exp(float64(best - s)))
			best = s
			if t > 0 {
				for i, a := range acc {
					acc[i] = quant.F32ToF16(quant.F16ToF32(a) * ms)
				}
			}
		} else {
			vs = float32(math.Exp(float64(s - best)))
		}
		vrow := p.vc[li][t*vd+vOff : t*vd+vOff+len(out)]
		for i, a := range acc {
			acc[i] = quant.F32ToF16(float32(math.FMA(float64(quant.F16ToF32(vrow[i])), float64(vs), float64(quant.F16ToF32(a)))))
		}
		sum = float32(math.FMA(float64(sum), float64(ms), float64(vs)))
	}
	inv := float32(0)
	if sum != 0 {
		inv = 1 / sum
	}
	for i, a := range acc {
		out[i] = quant.F16ToF32(a) * inv
	}
}

// angles sets cos and sin for position pos: pair i turns by pos·scale·base^(-2i/dims)/factor_i,
// the angle computed by llama.cpp's float32 recurrence theta_{i+1} = theta_i · base^(-2/dims).
func (p *hostPart) angles(pos int) {
	r := p.h.Rope
	dims := 2 * len(p.cos)
	scale := r.FreqScale
	if scale == 0 {
		scale = 1
	}
	step := float32(math.Pow(float64(r.FreqBase), float64(float32(-2)/float32(dims))))
	theta := float32(pos)
	for i := range p.cos {
		ff := float32(1)
		if i < len(r.Factors) && r.Factors[i] != 0 {
			ff = r.Factors[i]
		}
		t := scale * (theta / ff)
		p.cos[i] = float32(math.Cos(float64(t)))
		p.sin[i] = float32(math.Sin(float64(t)))
		theta *= step
	}
}

// rope rotates every head of x (one token's queries or keys) by the current angles: pairs
// (2i, 2i+1), or (i, i+dims/2) for NEOX.
func (p *hostPart) rope(x []float32) {
	half := len(p.cos)
	hd := p.h.HeadDim
	neox := p.h.Rope.Kind == model.RopeNeoX
	for h0 := 0; h0+hd <= len(x); h0 += hd {
		head := x[h0 : h0+hd]
		for i := 0; i < half; i++ {
			a, b := 2*i, 2*i+1
			if neox {
				a, b = i, i+half
			}
			x0, x1, c, s := head[a], head[b], p.cos[i], p.sin[i]
			// separate roundings, no fused multiply-add, as the reference computes it
			head[a] = float32(x0*c) - float32(x1*s)
			head[b] = float32(x0*s) + float32(x1*c)
		}
	}
}

// head applies the final norm and the output projection to n rows of hidden states,
// returning the logits of every row.
func (p *hostPart) head(hidden []float32, n int) []float32 {
	dim, vocab := p.h.Dim, p.h.VocabSize
	out := make([]float32, n*vocab)
	for b0 := 0; b0 < n; b0 += hostBatch {
		nb := min(hostBatch, n-b0)
		for i := 0; i < nb; i++ {
			rmsNormF32(p.xn[i*dim:(i+1)*dim], hidden[(b0+i)*dim:(b0+i+1)*dim], p.m.OutputNorm.Values, p.h.NormEps)
		}
		p.matmul(out[b0*vocab:(b0+nb)*vocab], p.m.Output, p.xn[:nb*dim], nb)
	}
	return out
}

// matmul sets out[i*rows+r] = W.row(r) · x_i for the n ≤ hostBatch tokens of x, each input
// rounded once to W's activation layout; rows are split over the cores and every weight row
// meets all n inputs while it is in cache.
func (p *hostPart) matmul(out []float32, w model.Matrix, x []float32, n int) {
	for i := 0; i < n; i++ {
		p.xq[i] = quant.QuantizeActivation(w.Type, x[i*w.Cols:(i+1)*w.Cols], p.xq[i])
	}
	xq := p.xq[:n]
	p.parallel(w.Rows, max(1, (1<<15)/(w.Cols*n)), func(lo, hi int) {
		var res [hostBatch]float32
		for r := lo; r < hi; r++ {
			quant.DotQuantizedBatch(w.Type, w.Row(r), xq, w.Cols, res[:n])
			for i := 0; i < n; i++ {
				out[i*w.Rows+r] = res[i]
			}
		}
	})
}

// parallel runs fn over [0, n) in up to p.threads chunks of at least minChunk.
func (p *hostPart) parallel(n, minChunk int, fn func(lo, hi int)) {
	workers := min(p.threads, max(1, n/minChunk))
	if workers <= 1 {
		fn(0, n)
		return
	}
	chunk := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := chunk; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo int) {
			defer wg.Done()
			fn(lo, min(lo+chunk, n))
		}(lo)
	}
	fn(0, min(chunk, n))
	wg.Wait()
}

// rmsNormF32 sets out = x / sqrt(mean(x²) + eps) * weight, the squares summed in double.
func rmsNormF32(out, x, weight []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	scale := 1 / float32(math.Sqrt(float64(float32(sum/float64(len(x)))+eps)))
	for i, v := range x {
		out[i] = v * scale * weight[i]
	}
}

func addF32(dst, src []float32) {
	for i, v := range src {
		dst[i] += v
	}
}
