package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Evaluator is the part of a model runner the bench drives: engine/model.Runner satisfies it.
// Eval at a position below the cached ones rewinds the cache to it (model.Runner's contract);
// the depth tests rely on that to reuse one untimed fill for every repetition.
type Evaluator interface {
	Eval(tokens []int, pos int, wantAllLogits bool) ([]float32, error)
	Reset()
}

// Config is one bench invocation's test plan.
type Config struct {
	NPrompt int // pp test size; 0 skips the pp test
	NGen    int // tg test size; 0 skips the tg test
	Reps    int // timed repetitions per test (llama-bench's -r)
	// Depths is llama-bench's -d: every test runs once per depth, with that many synthetic tokens
	// already in the cache (filled untimed), so it evaluates positions depth, depth+1, ...
	// nil means {0}: an empty cache.
	Depths []int
	// Context is the number of positions the evaluator's cache holds; Run refuses a plan that
	// does not fit it before evaluating anything. 0 leaves it unchecked.
	Context   int
	VocabSize int    // synthetic tokens are drawn from [firstToken, VocabSize)
	Seed      uint64 // synthetic prompts are reproducible from this
	// SteadyWarmup warms up until the runs are steady (moreWarmup) instead of llama-bench's one
	// warm-up run: for a GPU, whose first run creates pipelines and whose clocks then ramp.
	SteadyWarmup bool
}

// Spec is one test of a plan: the n_prompt, n_gen and n_depth of one llama-bench row.
type Spec struct {
	NPrompt, NGen, Depth int
}

// Name is the test's llama-bench label: "pp512", "tg128 @ d4096".
func (s Spec) Name() string {
	return Record{NPrompt: s.NPrompt, NGen: s.NGen, NDepth: s.Depth}.TestName()
}

// positions is how far into the cache the test reaches.
func (s Spec) positions() int { return s.Depth + s.NPrompt + s.NGen }

// Tests lists the plan's tests in llama-bench's order: for each depth, the pp test, then the tg
// test (`-p 512 -n 128 -d 0,4096` runs pp512, tg128, pp512 @ d4096, tg128 @ d4096).
func (c Config) Tests() []Spec {
	depths := c.Depths
	if len(depths) == 0 {
		depths = []int{0}
	}
	var specs []Spec
	for _, d := range depths {
		if c.NPrompt > 0 {
			specs = append(specs, Spec{NPrompt: c.NPrompt, Depth: d})
		}
		if c.NGen > 0 {
			specs = append(specs, Spec{NGen: c.NGen, Depth: d})
		}
	}
	return specs
}

// deepest is the test that reaches furthest into the cache (the first of equals).
func (c Config) deepest() Spec {
	var d Spec
	for _, s := range c.Tests() {
		if s.positions() > d.positions() {
			d = s
		}
	}
	return d
}

// NeedContext is the number of cache positions the plan's deepest test reaches: its depth plus
// its own tokens (llama-bench sizes its n_ctx the same way).
func (c Config) NeedContext() int { return c.deepest().positions() }

// ContextError says that a plan's deepest test does not fit the context it would run in.
type ContextError struct {
	Test    string // the deepest test, "tg128 @ d4096"
	Depth   int    // its depth
	Tokens  int    // its own tokens
	Context int    // the positions available
}

// Need is the context the test needs.
func (e *ContextError) Need() int { return e.Depth + e.Tokens }

func (e *ContextError) Error() string {
	return fmt.Sprintf("%s needs %d positions of context (%d already in the cache + %d tested), but the context holds %d",
		e.Test, e.Need(), e.Depth, e.Tokens, e.Context)
}

// CheckContext returns a *ContextError when the plan's deepest test does not fit ctx positions.
func (c Config) CheckContext(ctx int) error {
	d := c.deepest()
	if d.positions() <= ctx {
		return nil
	}
	return &ContextError{Test: d.Name(), Depth: d.Depth, Tokens: d.NPrompt + d.NGen, Context: ctx}
}

// Phase says what a progress event is about.
type Phase string

const (
	PhaseDepth  Phase = "depth" // the untimed fill of the cache before a depth test; not a step
	PhaseWarmup Phase = "warmup"
	PhaseRep    Phase = "rep"
	PhaseDone   Phase = "done"
)

// Progress is sent after each depth fill, each warm-up and each timed repetition.
type Progress struct {
	Test     string  `json:"test"` // "pp512", "tg128 @ d4096"
	Phase    Phase   `json:"phase"`
	Rep      int     `json:"rep"`   // 1-based; 0 for the warm-up and the depth fill
	Reps     int     `json:"reps"`  // total timed repetitions of this test
	Step     int     `json:"step"`  // completed steps over all tests (warm-ups included, depth fills not)
	Steps    int     `json:"steps"` // total steps over all tests
	TokensPS float64 `json:"tokens_per_second,omitempty"`
}

// ErrCancelled is returned (wrapped) when the context ends mid-run; the records finished so far
// come back with it.
var ErrCancelled = errors.New("bench cancelled")

// firstToken skips the lowest ids, which are the special tokens in every vocabulary we load.
const firstToken = 3

// fillBatch is how many depth tokens one evaluation takes: llama-bench's n_batch, as Target.Fill
// records it.
const fillBatch = 512

// Run times the configured tests on ev. Each returned record carries the samples and summary; the
// caller fills in model, device and build fields.
//
// A test at depth N first fills the cache with N synthetic tokens (untimed), then times its
// evaluations at positions N, N+1, ... Every repetition rewinds the cache to N, so the fill is
// made once and shared by the tests of one depth (llama-bench restores a saved state instead);
// a deeper test extends the fill, a test at depth 0 starts from an empty cache.
func Run(ctx context.Context, ev Evaluator, cfg Config, progress func(Progress)) ([]Record, error) {
	if cfg.Reps < 1 {
		return nil, fmt.Errorf("bench repetitions must be at least 1, got %d", cfg.Reps)
	}
	if cfg.NPrompt < 0 || cfg.NGen < 0 || cfg.NPrompt+cfg.NGen == 0 {
		return nil, fmt.Errorf("bench needs -p > 0 or -n > 0 (got -p %d -n %d)", cfg.NPrompt, cfg.NGen)
	}
	for _, d := range cfg.Depths {
		if d < 0 {
			return nil, fmt.Errorf("bench depth must be 0 or more tokens, got %d", d)
		}
	}
	if cfg.VocabSize <= firstToken {
		return nil, fmt.Errorf("bench needs a vocabulary larger than %d tokens, model has %d", firstToken, cfg.VocabSize)
	}
	if cfg.Context > 0 {
		if err := cfg.CheckContext(cfg.Context); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	tests := cfg.Tests()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x766b6c6c6d))
	fill := newDepthFill(ev, rand.New(rand.NewPCG(cfg.Seed, 0x64657074)), cfg.VocabSize)
	steps := len(tests) * (cfg.Reps + 1)
	step := 0
	var records []Record
	for _, t := range tests {
		rec := Record{NPrompt: t.NPrompt, NGen: t.NGen, NDepth: t.Depth, Reps: cfg.Reps, Warmup: 1, Tool: "vkllm", TypeK: "f16", TypeV: "f16"}
		n := t.NPrompt + t.NGen
		name := rec.TestName()
		if t.Depth > 0 {
			elapsed, filled, err := fill.to(ctx, t.Depth)
			if err != nil {
				if ctx.Err() != nil {
					return records, fmt.Errorf("%s: %w", name, ErrCancelled)
				}
				return records, fmt.Errorf("%s: fill the cache to depth %d: %w", name, t.Depth, err)
			}
			if filled > 0 {
				progress(Progress{Test: name, Phase: PhaseDepth, Reps: cfg.Reps, Step: step, Steps: steps, TokensPS: float64(filled) / elapsed.Seconds()})
			}
		} else {
			fill.reset()
		}
		// runOnce makes one run of the test (rep: 0 for a warm-up, for the error's text).
		runOnce := func(rep int) (time.Duration, error) {
			if err := ctx.Err(); err != nil {
				return 0, fmt.Errorf("%s: %w", name, ErrCancelled)
			}
			tokens := syntheticTokens(rng, n, cfg.VocabSize)
			var elapsed time.Duration
			var err error
			if t.NPrompt > 0 {
				elapsed, err = timePrefill(ev, tokens, t.Depth)
			} else {
				elapsed, err = timeDecode(ctx, ev, tokens, t.Depth)
			}
			if err != nil {
				if ctx.Err() != nil {
					return 0, fmt.Errorf("%s: %w", name, ErrCancelled)
				}
				return 0, fmt.Errorf("%s repetition %d: %w", name, rep, err)
			}
			return elapsed, nil
		}
		// The warm-up: one untimed run (one progress step), more while the runs are not yet
		// steady where cfg.SteadyWarmup asks (moreWarmup).
		step++
		var prev time.Duration
		for rec.Warmup = 1; ; rec.Warmup++ {
			elapsed, err := runOnce(0)
			if err != nil {
				return records, err
			}
			progress(Progress{Test: name, Phase: PhaseWarmup, Reps: cfg.Reps, Step: step, Steps: steps, TokensPS: float64(n) / elapsed.Seconds()})
			if !cfg.SteadyWarmup || !moreWarmup(rec.Warmup, prev, elapsed) {
				break
			}
			prev = elapsed
		}
		samples := make([]int64, 0, cfg.Reps)
		for rep := 1; rep <= cfg.Reps; rep++ {
			elapsed, err := runOnce(rep)
			if err != nil {
				return records, err
			}
			step++
			samples = append(samples, elapsed.Nanoseconds())
			progress(Progress{Test: name, Phase: PhaseRep, Rep: rep, Reps: cfg.Reps, Step: step, Steps: steps, TokensPS: float64(n) / elapsed.Seconds()})
		}
		rec.Summary = Summarize(samples, n)
		if t.NPrompt > 0 {
			rec.TTFTMs = float64(rec.AvgNs) / 1e6
		}
		if t.NGen > 0 {
			rec.Decode = decodeMode(ev)
		}
		rec.TestTime = time.Now().UTC().Format(time.RFC3339)
		records = append(records, rec)
	}
	progress(Progress{Phase: PhaseDone, Step: steps, Steps: steps})
	return records, nil
}

// The warm-up with Config.SteadyWarmup: one untimed run, and more while a run is short (under warmupShort) and its time
// still moved by more than warmupSteady from the one before, at most warmupMax in all. On an
// H200 a 60 ms pp512's first warm-up (pipelines created, staging learnt: 300 ms) left the GPU's
// clocks low, and the first timed repetition ran at half speed in two processes of three
// (docs/PERF.md, session 17); llama-bench, whose warm-up is GPU work alone, showed no slow first
// repetition. A run of a second or more warms the device by itself, except the first: it
// creates the pipelines (a second and more on lavapipe under load, where a test's runs then
// take 50 ms), so its time says nothing of the device's and a second warm-up always follows.
const (
	warmupMax    = 5
	warmupShort  = time.Second
	warmupSteady = 0.10
)

// moreWarmup reports whether another warm-up run follows done runs, the last two of which took
// prev (zero after the first) and last.
func moreWarmup(done int, prev, last time.Duration) bool {
	if done == 1 {
		return true
	}
	if done >= warmupMax || last >= warmupShort {
		return false
	}
	return math.Abs(float64(last-prev)) > warmupSteady*float64(prev)
}

func syntheticTokens(rng *rand.Rand, n, vocab int) []int {
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = firstToken + rng.IntN(vocab-firstToken)
	}
	return tokens
}

// depthFill keeps track of the synthetic tokens at the start of the cache. Its tokens are one
// sequence drawn as needed, so a shallower depth is a prefix of a deeper one.
type depthFill struct {
	ev     Evaluator
	rng    *rand.Rand
	vocab  int
	tokens []int // the fill sequence drawn so far
	cached int   // how many of them are at the start of the cache (the rest of it is test tokens)
}

func newDepthFill(ev Evaluator, rng *rand.Rand, vocab int) *depthFill {
	return &depthFill{ev: ev, rng: rng, vocab: vocab}
}

// reset forgets the fill: a depth-0 test empties the cache.
func (f *depthFill) reset() { f.cached = 0 }

// to makes the cache start with depth fill tokens, evaluating only those not already there (in
// batches of fillBatch, checking ctx between them). It returns the time spent and the number of
// tokens evaluated.
func (f *depthFill) to(ctx context.Context, depth int) (time.Duration, int, error) {
	if f.cached >= depth {
		f.cached = depth // the test rewinds the cache to depth and writes its own tokens after it
		return 0, 0, nil
	}
	if len(f.tokens) < depth {
		f.tokens = append(f.tokens, syntheticTokens(f.rng, depth-len(f.tokens), f.vocab)...)
	}
	if f.cached == 0 {
		f.ev.Reset()
	}
	start, from := time.Now(), f.cached
	for pos := f.cached; pos < depth; pos += fillBatch {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		end := min(pos+fillBatch, depth)
		if _, err := f.ev.Eval(f.tokens[pos:end], pos, false); err != nil {
			f.cached = 0
			return 0, 0, fmt.Errorf("evaluate fill tokens %d-%d: %w", pos, end-1, err)
		}
		f.cached = end
	}
	return time.Since(start), depth - from, nil
}

// timePrefill is one pp repetition: all tokens in one batched evaluation at position depth (an
// empty cache at depth 0; otherwise the cache rewound to its depth fill).
func timePrefill(ev Evaluator, tokens []int, depth int) (time.Duration, error) {
	if depth == 0 {
		ev.Reset()
	}
	start := time.Now()
	if _, err := ev.Eval(tokens, depth, false); err != nil {
		return 0, fmt.Errorf("prefill %d tokens at position %d: %w", len(tokens), depth, err)
	}
	return time.Since(start), nil
}

// greedyEvaluator is an evaluator that picks the next token on its device (the resident Vulkan
// driver): Greedy evaluates token at pos and returns the argmax of its logits, as a greedy
// generation (temperature 0) runs its steps.
type greedyEvaluator interface {
	Greedy(token, pos int) (int, error)
}

// chainingEvaluator is a greedyEvaluator that may queue each greedy step behind the one before
// (the resident Vulkan driver's VKLLM_GPU_CHAIN); ChainsGreedy says whether it does.
type chainingEvaluator interface {
	ChainsGreedy() bool
}

// decodeMode is how timeDecode runs ev's steps (Record.Decode).
func decodeMode(ev Evaluator) string {
	if _, ok := ev.(greedyEvaluator); !ok {
		return DecodeLogits
	}
	if c, ok := ev.(chainingEvaluator); ok && c.ChainsGreedy() {
		return DecodeGreedyChained
	}
	return DecodeGreedy
}

// timeDecode is one tg repetition: one token per evaluation at positions depth, depth+1, ...
// On an evaluator that picks tokens on its device it is a greedy generation from the first
// token (each step's token the step before's argmax), timed as `vkllm run --temp 0` runs it;
// otherwise each step evaluates the next of tokens and reads back its logits.
func timeDecode(ctx context.Context, ev Evaluator, tokens []int, depth int) (time.Duration, error) {
	if depth == 0 {
		ev.Reset()
	}
	start := time.Now()
	if g, ok := ev.(greedyEvaluator); ok {
		tok := tokens[0]
		for i := range tokens {
			if i%16 == 0 && ctx.Err() != nil {
				return 0, ctx.Err()
			}
			next, err := g.Greedy(tok, depth+i)
			if err != nil {
				return 0, fmt.Errorf("decode step %d at position %d: %w", i, depth+i, err)
			}
			tok = next
		}
		return time.Since(start), nil
	}
	for i, tok := range tokens {
		if i%16 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if _, err := ev.Eval([]int{tok}, depth+i, false); err != nil {
			return 0, fmt.Errorf("decode step %d at position %d: %w", i, depth+i, err)
		}
	}
	return time.Since(start), nil
}
