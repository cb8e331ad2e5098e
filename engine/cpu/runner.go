// Package cpu is the reference forward pass: every supported architecture on float32
// activations, multithreaded over matrix rows, with dot products taken directly on the
// quantized weight blocks. Its logits agree with llama.cpp's CPU backend within the noise of
// float accumulation order (and of activation quantization for quantized weights); the Vulkan
// backend is checked against it.
package cpu

import (
	"fmt"
	"runtime"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// maxBatch is the number of prompt tokens evaluated together: each weight row is read once per
// batch instead of once per token.
const maxBatch = 32

// Options configure a Runner.
type Options struct {
	Threads int    // worker goroutines; 0 = runtime.NumCPU()
	Context int    // positions the KV cache may hold; 0 = the model's context length
	KV      KVType // "" = KVF16
}

// Runner is the CPU forward pass of one model with its KV cache. It is not safe for concurrent
// use.
type Runner struct {
	m       *model.Model
	h       model.Hyperparameters
	pool    *pool
	kv      *kvCache
	rope    rope
	ctx     int
	filled  int // positions currently in the cache
	forward func(n, pos int)
	scale   float32 // attention score scale, 1/sqrt(HeadDim)

	// activations for up to maxBatch tokens, token-major
	x, xb, q, k, v, att, gate, up []float32
	logits                        []float32
	act                           activation // quantized form of the current matmul input
	mm                            matmulJob
	mmRows                        func(w, lo, hi int) // r.matmulRows, bound once
	attnScratch                   []attnScratch       // per pool thread
}

// New builds a runner for m. Only the KV cache and activation buffers are allocated; weights
// stay in the file mapping.
func New(m *model.Model, opts Options) (*Runner, error) {
	h := m.Hyper
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	ctx := opts.Context
	if ctx <= 0 {
		ctx = h.ContextLength
	}
	kvType := opts.KV
	switch kvType {
	case "":
		kvType = KVF16
	case KVF16, KVF32:
	default:
		return nil, fmt.Errorf("cpu runner: KV cache type %q is not supported (want f16 or f32)", kvType)
	}
	for _, mat := range weightsOf(m) {
		if !dotSupported(mat.Type) {
			return nil, fmt.Errorf("cpu runner: tensor %q has type %s, which the CPU backend cannot multiply", mat.Name, mat.Type)
		}
	}
	r := &Runner{
		m:     m,
		h:     h,
		pool:  newPool(threads),
		kv:    newKVCache(kvType, h.Layers, h.KDim(), h.VDim(), ctx),
		rope:  newRope(h.Rope.Dims, h.Rope.FreqBase, h.Rope.FreqScale, h.Rope.Kind == model.RopeNeoX, h.Rope.Factors),
		ctx:   ctx,
		scale: 1 / sqrt32(float32(h.HeadDim)),
	}
	switch h.Arch {
	case "llama":
		r.forward = r.forwardLlama
	case "qwen2":
		r.forward = r.forwardQwen2
	case "qwen3":
		r.forward = r.forwardQwen3
	default:
		return nil, fmt.Errorf("cpu runner: no forward pass for architecture %q", h.Arch)
	}
	r.mmRows = r.matmulRows
	r.attnScratch = make([]attnScratch, r.pool.threads)
	b := maxBatch
	r.x = make([]float32, b*h.Dim)
	r.xb = make([]float32, b*max(h.Dim, h.Heads*h.ValueDim))
	r.q = make([]float32, b*h.QDim())
	r.k = make([]float32, b*h.KDim())
	r.v = make([]float32, b*h.VDim())
	r.att = make([]float32, b*h.Heads*h.ValueDim)
	r.gate = make([]float32, b*h.FFN)
	r.up = make([]float32, b*h.FFN)
	return r, nil
}

func weightsOf(m *model.Model) []model.Matrix {
	out := []model.Matrix{m.Output}
	for _, l := range m.Layers {
		out = append(out, l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down)
	}
	return out
}

// Name identifies the backend in logs and ModelInfo.
func (r *Runner) Name() string { return "cpu" }

// Threads is the number of worker goroutines.
func (r *Runner) Threads() int { return r.pool.threads }

// Context is the number of positions the KV cache can hold.
func (r *Runner) Context() int { return r.ctx }

// Reset empties the KV cache.
func (r *Runner) Reset() {
	r.kv.truncate(0)
	r.filled = 0
}

// Close stops the worker goroutines.
func (r *Runner) Close() error {
	r.pool.close()
	return nil
}

// Eval runs tokens at positions pos, pos+1, ... and returns the logits of the last token, or of
// every token when wantAllLogits. pos may rewind into the cache (later positions are dropped)
// but not skip ahead of it.
func (r *Runner) Eval(tokens []int, pos int, wantAllLogits bool) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("cpu eval: no tokens")
	}
	if pos < 0 || pos > r.filled {
		return nil, fmt.Errorf("cpu eval: position %d is outside the %d cached positions", pos, r.filled)
	}
	if pos+len(tokens) > r.ctx {
		return nil, fmt.Errorf("cpu eval: %d tokens at position %d exceed the context of %d", len(tokens), pos, r.ctx)
	}
	for i, id := range tokens {
		if id < 0 || id >= r.h.VocabSize {
			return nil, fmt.Errorf("cpu eval: token %d (index %d) is outside the vocabulary of %d", id, i, r.h.VocabSize)
		}
	}
	r.kv.truncate(pos)
	r.filled = pos
	vocab := r.h.VocabSize
	var out []float32
	if wantAllLogits {
		out = make([]float32, len(tokens)*vocab)
	}
	for start := 0; start < len(tokens); start += maxBatch {
		batch := tokens[start:min(start+maxBatch, len(tokens))]
		n := len(batch)
		if err := r.embed(batch); err != nil {
			return nil, err
		}
		r.forward(n, pos+start)
		r.filled = pos + start + n
		switch {
		case wantAllLogits:
			r.head(0, n)
			copy(out[start*vocab:], r.logits[:n*vocab])
		case start+n == len(tokens):
			r.head(n-1, n)
			out = append([]float32(nil), r.logits[:vocab]...)
		}
	}
	return out, nil
}

// embed copies the embedding rows of the batch into x, dequantizing one row per token.
func (r *Runner) embed(tokens []int) error {
	e, dim := r.m.TokenEmbd, r.h.Dim
	for i, id := range tokens {
		if err := quant.Dequantize(e.Type, e.Row(id), r.x[i*dim:(i+1)*dim]); err != nil {
			return fmt.Errorf("embed token %d from %q: %w", id, e.Name, err)
		}
	}
	return nil
}

// head applies the final norm and the output projection to tokens lo..hi-1 of the batch,
// leaving their logits in r.logits.
func (r *Runner) head(lo, hi int) {
	dim, n := r.h.Dim, hi-lo
	if len(r.logits) < n*r.h.VocabSize {
		r.logits = make([]float32, n*r.h.VocabSize)
	}
	xs := r.xb[:n*dim]
	for i := 0; i < n; i++ {
		rmsNorm(xs[i*dim:(i+1)*dim], r.x[(lo+i)*dim:(lo+i+1)*dim], r.m.OutputNorm.Values, r.h.NormEps)
	}
	r.matmul(r.logits[:n*r.h.VocabSize], r.m.Output, xs, n)
}
