package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Evaluator is the part of a model runner the bench drives: engine/model.Runner satisfies it.
type Evaluator interface {
	Eval(tokens []int, pos int, wantAllLogits bool) ([]float32, error)
	Reset()
}

// Config is one bench invocation's test plan.
type Config struct {
	NPrompt   int    // pp test size; 0 skips the pp test
	NGen      int    // tg test size; 0 skips the tg test
	Reps      int    // timed repetitions per test (llama-bench's -r)
	VocabSize int    // synthetic tokens are drawn from [firstToken, VocabSize)
	Seed      uint64 // synthetic prompts are reproducible from this
}

// Phase says what a progress event is about.
type Phase string

const (
	PhaseWarmup Phase = "warmup"
	PhaseRep    Phase = "rep"
	PhaseDone   Phase = "done"
)

// Progress is sent after each warm-up and each timed repetition.
type Progress struct {
	Test     string  `json:"test"` // "pp512", "tg128"
	Phase    Phase   `json:"phase"`
	Rep      int     `json:"rep"`   // 1-based; 0 for the warm-up
	Reps     int     `json:"reps"`  // total timed repetitions of this test
	Step     int     `json:"step"`  // completed steps over all tests (warm-ups included)
	Steps    int     `json:"steps"` // total steps over all tests
	TokensPS float64 `json:"tokens_per_second,omitempty"`
}

// ErrCancelled is returned (wrapped) when the context ends mid-run; the records finished so far
// come back with it.
var ErrCancelled = errors.New("bench cancelled")

// firstToken skips the lowest ids, which are the special tokens in every vocabulary we load.
const firstToken = 3

// Run times the configured tests on ev. Each returned record carries the samples and summary; the
// caller fills in model, device and build fields.
func Run(ctx context.Context, ev Evaluator, cfg Config, progress func(Progress)) ([]Record, error) {
	if cfg.Reps < 1 {
		return nil, fmt.Errorf("bench repetitions must be at least 1, got %d", cfg.Reps)
	}
	if cfg.NPrompt < 0 || cfg.NGen < 0 || cfg.NPrompt+cfg.NGen == 0 {
		return nil, fmt.Errorf("bench needs -p > 0 or -n > 0 (got -p %d -n %d)", cfg.NPrompt, cfg.NGen)
	}
	if cfg.VocabSize <= firstToken {
		return nil, fmt.Errorf("bench needs a vocabulary larger than %d tokens, model has %d", firstToken, cfg.VocabSize)
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	type test struct {
		nPrompt, nGen int
		run           func(tokens []int) (time.Duration, error)
	}
	var tests []test
	if cfg.NPrompt > 0 {
		tests = append(tests, test{nPrompt: cfg.NPrompt, run: func(tokens []int) (time.Duration, error) { return timePrefill(ev, tokens) }})
	}
	if cfg.NGen > 0 {
		tests = append(tests, test{nGen: cfg.NGen, run: func(tokens []int) (time.Duration, error) { return timeDecode(ctx, ev, tokens) }})
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x766b6c6c6d))
	steps := len(tests) * (cfg.Reps + 1)
	step := 0
	var records []Record
	for _, t := range tests {
		rec := Record{NPrompt: t.nPrompt, NGen: t.nGen, Reps: cfg.Reps, Warmup: 1, Tool: "vkllm", TypeK: "f16", TypeV: "f16"}
		n := t.nPrompt + t.nGen
		name := rec.TestName()
		var samples []int64
		for rep := 0; rep <= cfg.Reps; rep++ {
			if err := ctx.Err(); err != nil {
				return records, fmt.Errorf("%s: %w", name, ErrCancelled)
			}
			tokens := syntheticTokens(rng, n, cfg.VocabSize)
			elapsed, err := t.run(tokens)
			if err != nil {
				if ctx.Err() != nil {
					return records, fmt.Errorf("%s: %w", name, ErrCancelled)
				}
				return records, fmt.Errorf("%s repetition %d: %w", name, rep, err)
			}
			step++
			p := Progress{Test: name, Rep: rep, Reps: cfg.Reps, Step: step, Steps: steps, TokensPS: float64(n) / elapsed.Seconds()}
			if rep == 0 {
				p.Phase = PhaseWarmup
			} else {
				p.Phase = PhaseRep
				samples = append(samples, elapsed.Nanoseconds())
			}
			progress(p)
		}
		rec.Summary = Summarize(samples, n)
		if t.nPrompt > 0 {
			rec.TTFTMs = float64(rec.AvgNs) / 1e6
		}
		rec.TestTime = time.Now().UTC().Format(time.RFC3339)
		records = append(records, rec)
	}
	progress(Progress{Phase: PhaseDone, Step: steps, Steps: steps})
	return records, nil
}

func syntheticTokens(rng *rand.Rand, n, vocab int) []int {
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = firstToken + rng.IntN(vocab-firstToken)
	}
	return tokens
}

// timePrefill is one pp repetition: an empty cache, then all tokens in one batched evaluation.
func timePrefill(ev Evaluator, tokens []int) (time.Duration, error) {
	ev.Reset()
	start := time.Now()
	if _, err := ev.Eval(tokens, 0, false); err != nil {
		return 0, fmt.Errorf("prefill %d tokens: %w", len(tokens), err)
	}
	return time.Since(start), nil
}

// timeDecode is one tg repetition: an empty cache, then one token per evaluation.
func timeDecode(ctx context.Context, ev Evaluator, tokens []int) (time.Duration, error) {
	ev.Reset()
	start := time.Now()
	for pos, tok := range tokens {
		if pos%16 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if _, err := ev.Eval([]int{tok}, pos, false); err != nil {
			return 0, fmt.Errorf("decode step %d: %w", pos, err)
		}
	}
	return time.Since(start), nil
}
