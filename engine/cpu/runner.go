// Package cpu is the reference forward pass: every supported architecture on float32
// activations, multithreaded over matrix rows, with dot products taken directly on the
// quantized weight blocks. Its logits agree with llama.cpp's CPU backend within the noise of
// float accumulation order (and of activation quantization for quantized weights); the Vulkan
// backend is checked against it.
package cpu

import (
	"fmt"
	"math"
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
	forward func(n, pos, layers int) // the architecture's blocks 0..layers-1 over the batch in x
	scale   float32                  // attention score scale, 1/sqrt(HeadDim)

	// activations for up to maxBatch tokens, token-major
	x, xb, q, k, v, att, gate, up []float32
	logits                        []float32
	act                           activation // quantized form of the current matmul input
	mm                            matmulJob
	mmRows                        func(w, lo, hi int) // r.matmulRows, bound once
	attnScratch                   []attnScratch       // per pool thread
	moeS                          moeScratch          // the mixture-of-experts block's buffers
	dn                            deltaScratch        // the Gated DeltaNet and gated attention blocks' buffers
	rec                           *recurrentState     // the recurrent layers' state; nil without any
	routerMargin                  float32             // the smallest router margin of the last evaluation (RouterMargin)
	routing                       [][]int             // the last evaluation's selected experts per mixture-of-experts layer (Routing)
	routedLayers                  int                 // the mixture-of-experts layers the current batch has routed
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
	case "qwen2moe":
		r.forward = r.forwardQwen2MoE
	case "qwen3moe":
		r.forward = r.forwardQwen3MoE
	case "qwen35":
		r.forward = r.forwardQwen35
	case "qwen35moe":
		r.forward = r.forwardQwen35MoE
	default:
		return nil, fmt.Errorf("cpu runner: no forward pass for architecture %q", h.Arch)
	}
	if len(h.Recurrent) > 0 {
		r.rec = newRecurrentState(h)
		r.dn = newDeltaScratch(h)
		r.kv.skip = h.Recurrent
	}
	if h.Rope.Sections != [4]int{} {
		r.rope.still = make([]bool, h.Rope.Dims/2)
		for i := range r.rope.still {
			r.rope.still[i] = h.Rope.StillPair(i)
		}
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
	ff := h.FFN
	if h.MoE.Experts > 0 {
		ff = max(h.MoE.FFN, h.MoE.SharedFFN)
		r.moeS = newMoEScratch(h)
	}
	r.gate = make([]float32, b*ff)
	r.up = make([]float32, b*ff)
	return r, nil
}

func weightsOf(m *model.Model) []model.Matrix {
	out := []model.Matrix{m.Output}
	for i := range m.Layers {
		out = append(out, m.Layers[i].Matrices()...)
	}
	return out
}

// Name identifies the backend in logs and ModelInfo.
func (r *Runner) Name() string { return "cpu" }

// Threads is the number of worker goroutines.
func (r *Runner) Threads() int { return r.pool.threads }

// Context is the number of positions the KV cache can hold.
func (r *Runner) Context() int { return r.ctx }

// Reset empties the KV cache (and the recurrent layers' state).
func (r *Runner) Reset() {
	r.kv.truncate(0)
	if r.rec != nil {
		r.rec.reset()
	}
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
	if err := r.check("cpu eval", tokens, pos, r.h.Layers); err != nil {
		return nil, err
	}
	dim, vocab := r.h.Dim, r.h.VocabSize
	var out []float32
	if wantAllLogits {
		out = make([]float32, len(tokens)*vocab)
	}
	err := r.run(tokens, pos, r.h.Layers, func(start, n int) {
		switch {
		case wantAllLogits:
			r.head(r.x[:n*dim], n)
			copy(out[start*vocab:], r.logits[:n*vocab])
		case start+n == len(tokens):
			r.head(r.x[(n-1)*dim:n*dim], 1)
			out = append([]float32(nil), r.logits[:vocab]...)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EvalLayers runs tokens at positions pos, pos+1, ... through the token embedding and the
// first layers blocks only, and returns the residual stream after them: len(tokens) rows of
// Dim, token-major, before the final norm (layers 0 returns the embeddings). It is the CPU
// half of a partial offload: another backend runs the remaining blocks on these states, and
// Head turns the last block's output into logits.
//
// The keys and values of blocks 0..layers-1 are cached exactly as Eval caches them, and the
// numerics are Eval's own. pos may rewind into those blocks' cache (later positions are
// dropped from every block) but not skip ahead of it; deeper blocks hold at most pos
// positions afterwards, so an Eval that follows must start no later than that.
func (r *Runner) EvalLayers(tokens []int, pos, layers int) ([]float32, error) {
	if layers < 0 || layers > r.h.Layers {
		return nil, fmt.Errorf("cpu eval layers: %d layers requested of the model's %d", layers, r.h.Layers)
	}
	if r.rec != nil && layers != r.h.Layers {
		return nil, fmt.Errorf("cpu eval layers: %s has recurrent layers, whose state cannot be split from the rest: evaluate all %d layers", r.h.Arch, r.h.Layers)
	}
	if err := r.check("cpu eval layers", tokens, pos, layers); err != nil {
		return nil, err
	}
	dim := r.h.Dim
	out := make([]float32, len(tokens)*dim)
	err := r.run(tokens, pos, layers, func(start, n int) { copy(out[start*dim:], r.x[:n*dim]) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RouterMargin is how close the last Eval or EvalLayers came to routing its last token to
// another expert: over the mixture-of-experts layers, the smallest gap between the router
// logit of the last expert selected for that token and that of the best one left out (+Inf for
// a dense model, or one whose tokens use every expert). Another backend whose router logits
// differ from these by more than the margin may route the token differently and get other
// logits for it: a near-tie of the routing, as a small top-2 gap of the output is one of the
// greedy token.
func (r *Runner) RouterMargin() float32 { return r.routerMargin }

// Routing returns the experts each mixture-of-experts layer selected for the tokens of the last
// Eval or EvalLayers: layer by layer, each token's Used ids best first, token after token. It
// is empty for a dense model.
func (r *Runner) Routing() [][]int { return r.routing }

// Head applies the final norm and the output projection to rows of hidden states (Dim
// values each, token-major: the residual stream after the last block, as EvalLayers with
// every layer returns it) and returns every row's logits, token-major. It reads and writes
// no cache.
func (r *Runner) Head(hidden []float32) ([]float32, error) {
	dim, vocab := r.h.Dim, r.h.VocabSize
	if len(hidden) == 0 || len(hidden)%dim != 0 {
		return nil, fmt.Errorf("cpu head: %d hidden values are not whole rows of %d", len(hidden), dim)
	}
	rows := len(hidden) / dim
	out := make([]float32, rows*vocab)
	for start := 0; start < rows; start += maxBatch {
		n := min(maxBatch, rows-start)
		r.head(hidden[start*dim:(start+n)*dim], n)
		copy(out[start*vocab:], r.logits[:n*vocab])
	}
	return out, nil
}

// check validates an evaluation of tokens at pos through blocks 0..layers-1; op names it in
// the error.
func (r *Runner) check(op string, tokens []int, pos, layers int) error {
	if len(tokens) == 0 {
		return fmt.Errorf("%s: no tokens", op)
	}
	cached := r.kv.positions(layers)
	if r.rec != nil {
		cached = min(cached, r.rec.pos)
	}
	if pos < 0 || pos > cached {
		return fmt.Errorf("%s: position %d is outside the %d cached positions", op, pos, cached)
	}
	if pos+len(tokens) > r.ctx {
		return fmt.Errorf("%s: %d tokens at position %d exceed the context of %d", op, len(tokens), pos, r.ctx)
	}
	for i, id := range tokens {
		if id < 0 || id >= r.h.VocabSize {
			return fmt.Errorf("%s: token %d (index %d) is outside the vocabulary of %d", op, id, i, r.h.VocabSize)
		}
	}
	return nil
}

// run drops the cached positions from pos on, then embeds tokens and runs them through
// blocks 0..layers-1, maxBatch at a time; after each batch, done reads the residual stream
// of its n tokens (from index start of tokens) in x.
//
// A model with recurrent layers first goes back to pos (rewindRecurrent), and keeps snapshots
// of its state after the tokens and, for several tokens, before the last one (so that the
// engine's rewind by one token to re-evaluate a prompt's last finds one): the last token of
// several is then a batch of its own.
func (r *Runner) run(tokens []int, pos, layers int, done func(start, n int)) error {
	if r.rec != nil && pos != r.rec.pos {
		if err := r.rewindRecurrent(pos); err != nil {
			return err
		}
	}
	r.kv.truncate(pos)
	r.routing = r.routing[:0] // from here on, this evaluation's tokens (not a rewind's)
	split := len(tokens)
	if r.rec != nil && len(tokens) > 1 {
		split = len(tokens) - 1
	}
	for start := 0; start < len(tokens); {
		end := min(start+maxBatch, len(tokens))
		if start < split && end > split {
			end = split
		}
		if err := r.step(tokens[start:end], pos+start, layers); err != nil {
			return err
		}
		done(start, end-start)
		if r.rec != nil && end == split && split < len(tokens) {
			r.rec.save(false)
		}
		start = end
	}
	if r.rec != nil {
		r.rec.save(len(tokens) == 1)
	}
	return nil
}

// step embeds one batch of tokens at pos and runs it through blocks 0..layers-1, leaving the
// residual stream in x.
func (r *Runner) step(batch []int, pos, layers int) error {
	r.routerMargin = float32(math.Inf(1))
	r.routedLayers = 0
	if err := r.embed(batch); err != nil {
		return err
	}
	r.forward(len(batch), pos, layers)
	if r.rec != nil {
		r.rec.advance(batch)
	}
	return nil
}

// rewindRecurrent brings a recurrent model back to pos, before the tokens it has folded in:
// from the latest snapshot at or before pos (or from the start), the remembered tokens up to
// pos are evaluated again, keys and values included.
func (r *Runner) rewindRecurrent(pos int) error {
	from, replay := r.rec.rewind(pos)
	r.kv.truncate(from)
	for start := 0; start < len(replay); start += maxBatch {
		batch := replay[start:min(start+maxBatch, len(replay))]
		if err := r.step(batch, from+start, r.h.Layers); err != nil {
			return fmt.Errorf("re-evaluate positions %d..%d of a recurrent model: %w", from, pos-1, err)
		}
	}
	return nil
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

// head applies the final norm and the output projection to the n rows of hidden states x,
// leaving their logits in r.logits.
func (r *Runner) head(x []float32, n int) {
	dim := r.h.Dim
	if len(r.logits) < n*r.h.VocabSize {
		r.logits = make([]float32, n*r.h.VocabSize)
	}
	xs := r.xb[:n*dim]
	for i := 0; i < n; i++ {
		rmsNorm(xs[i*dim:(i+1)*dim], x[i*dim:(i+1)*dim], r.m.OutputNorm.Values, r.h.NormEps)
	}
	r.matmul(r.logits[:n*r.h.VocabSize], r.m.Output, xs, n)
}
