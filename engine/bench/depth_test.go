package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// cacheEvaluator keeps the tokens a real runner would hold in its KV cache, with model.Runner's
// rules: Eval at a position below the cached ones rewinds to it, beyond them is an error.
type cacheEvaluator struct {
	cache  []int
	resets int
	calls  []cacheCall
}

// cacheCall is one Eval: where it started, how many tokens, and the cache before it (up to pos).
type cacheCall struct {
	pos, n int
	before []int
}

func (c *cacheEvaluator) Eval(tokens []int, pos int, _ bool) ([]float32, error) {
	if pos > len(c.cache) {
		return nil, fmt.Errorf("position %d skips past the %d cached", pos, len(c.cache))
	}
	c.calls = append(c.calls, cacheCall{pos: pos, n: len(tokens), before: append([]int(nil), c.cache[:pos]...)})
	c.cache = append(c.cache[:pos], tokens...)
	return []float32{0}, nil
}

func (c *cacheEvaluator) Reset() { c.cache, c.resets = nil, c.resets+1 }

func TestTestNamesFollowLlamaBenchMarkdown(t *testing.T) {
	for _, tc := range []struct {
		r    Record
		want string
	}{
		{Record{NPrompt: 512}, "pp512"},
		{Record{NGen: 128}, "tg128"},
		{Record{NPrompt: 512, NGen: 128}, "pp512+tg128"},
		{Record{NPrompt: 512, NDepth: 4096}, "pp512 @ d4096"},
		{Record{NGen: 128, NDepth: 4096}, "tg128 @ d4096"},
	} {
		if got := tc.r.TestName(); got != tc.want {
			t.Errorf("%+v: test name %q, want %q", tc.r, got, tc.want)
		}
	}
}

func TestConfigListsTestsInLlamaBenchOrderAndSizesTheContext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		tests string
		need  int
	}{
		{"no depth", Config{NPrompt: 512, NGen: 128}, "[pp512 tg128]", 512},
		{"depth list", Config{NPrompt: 512, NGen: 128, Depths: []int{0, 4096}}, "[pp512 tg128 pp512 @ d4096 tg128 @ d4096]", 4608},
		{"tg deeper than pp", Config{NPrompt: 16, NGen: 1000, Depths: []int{4096}}, "[pp16 @ d4096 tg1000 @ d4096]", 5096},
		{"tg only", Config{NGen: 128, Depths: []int{64, 8}}, "[tg128 @ d64 tg128 @ d8]", 192},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for _, s := range tc.cfg.Tests() {
				names = append(names, s.Name())
			}
			if got := fmt.Sprint(names); got != tc.tests {
				t.Errorf("tests %s, want %s", got, tc.tests)
			}
			if got := tc.cfg.NeedContext(); got != tc.need {
				t.Errorf("NeedContext %d, want %d", got, tc.need)
			}
			if err := tc.cfg.CheckContext(tc.need); err != nil {
				t.Errorf("CheckContext(%d) refused the context it needs: %v", tc.need, err)
			}
			var ce *ContextError
			if err := tc.cfg.CheckContext(tc.need - 1); !errors.As(err, &ce) || ce.Need() != tc.need || ce.Context != tc.need-1 {
				t.Errorf("CheckContext(%d) = %v, want a ContextError needing %d", tc.need-1, err, tc.need)
			}
		})
	}
}

func TestRunAtDepthTimesTestsAfterAnUntimedFill(t *testing.T) {
	ev := &cacheEvaluator{}
	var events []Progress
	const depth = 1100 // three fill batches: 512 + 512 + 76
	cfg := Config{NPrompt: 8, NGen: 4, Reps: 2, Depths: []int{0, depth}, VocabSize: 100, Seed: 3}
	records, err := Run(context.Background(), ev, cfg, func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var names []string
	for _, r := range records {
		names = append(names, r.TestName())
	}
	if fmt.Sprint(names) != "[pp8 tg4 pp8 @ d1100 tg4 @ d1100]" {
		t.Fatalf("records %v", names)
	}
	if records[2].NDepth != depth || records[3].NDepth != depth || records[0].NDepth != 0 {
		t.Errorf("n_depth of the records: %d %d %d %d", records[0].NDepth, records[1].NDepth, records[2].NDepth, records[3].NDepth)
	}

	// Depth 0: 3 pp calls and 3x4 tg steps, each run from an empty cache.
	d0 := 3 + 3*4
	for _, c := range ev.calls[:d0] {
		if c.pos > 3 {
			t.Fatalf("a depth-0 call at position %d", c.pos)
		}
	}
	// The fill: one sequence in batches of 512 from position 0, made once for both depth tests.
	fill := ev.calls[d0 : d0+3]
	for i, want := range []cacheCall{{pos: 0, n: 512}, {pos: 512, n: 512}, {pos: 1024, n: 76}} {
		if fill[i].pos != want.pos || fill[i].n != want.n {
			t.Errorf("fill call %d: %d tokens at %d, want %d at %d", i, fill[i].n, fill[i].pos, want.n, want.pos)
		}
	}
	filled := append(append([]int(nil), fill[2].before...), ev.cache[1024:1024+76]...)
	if len(fill[2].before) != 1024 {
		t.Fatalf("the last fill batch saw %d cached tokens, want 1024", len(fill[2].before))
	}
	// Every timed call at depth sees exactly the fill before its first position.
	timed := ev.calls[d0+3:]
	if len(timed) != 3+3*4 {
		t.Fatalf("%d calls after the fill, want %d (no second fill)", len(timed), 3+3*4)
	}
	for i, c := range timed {
		step := 0
		if i >= 3 {
			step = (i - 3) % 4
		}
		if c.pos != depth+step {
			t.Errorf("timed call %d at position %d, want %d", i, c.pos, depth+step)
		}
		if !equalInts(c.before[:depth], filled) {
			t.Errorf("timed call %d: the cache before it is not the %d-token fill", i, depth)
		}
		if (i < 3 && c.n != 8) || (i >= 3 && c.n != 1) {
			t.Errorf("timed call %d evaluated %d tokens", i, c.n)
		}
	}
	// Rates count the test's own tokens, not the depth.
	for _, r := range records {
		n := r.NPrompt + r.NGen
		for j, ns := range r.SamplesNs {
			if got := float64(n) * 1e9 / float64(ns); got != r.SamplesTs[j] {
				t.Errorf("%s sample %d: %.1f t/s from %d ns, want %d tokens over it", r.TestName(), j, r.SamplesTs[j], ns, n)
			}
		}
	}
	var depthEvents int
	for _, p := range events {
		if p.Phase == PhaseDepth {
			depthEvents++
			if p.Test != "pp8 @ d1100" || p.TokensPS <= 0 {
				t.Errorf("depth event %+v", p)
			}
		}
	}
	if depthEvents != 1 || events[len(events)-1].Phase != PhaseDone || events[len(events)-1].Steps != 4*3 {
		t.Errorf("%d depth events (want 1), last event %+v", depthEvents, events[len(events)-1])
	}
}

func TestRunReusesAShallowerFillAndExtendsForADeeperOne(t *testing.T) {
	for _, tc := range []struct {
		name   string
		depths []int
		fills  []cacheCall // the fill evaluations, in order
	}{
		{"deeper first", []int{40, 10}, []cacheCall{{pos: 0, n: 40}}},
		{"shallower first", []int{10, 40}, []cacheCall{{pos: 0, n: 10}, {pos: 10, n: 30}}},
		{"back to zero", []int{10, 0, 10}, []cacheCall{{pos: 0, n: 10}, {pos: 0, n: 10}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &cacheEvaluator{}
			if _, err := Run(context.Background(), ev, Config{NGen: 2, Reps: 1, Depths: tc.depths, VocabSize: 50}, nil); err != nil {
				t.Fatalf("Run: %v", err)
			}
			var fills []cacheCall
			for _, c := range ev.calls {
				if c.n > 1 {
					fills = append(fills, cacheCall{pos: c.pos, n: c.n})
				}
			}
			if fmt.Sprint(fills) != fmt.Sprint(tc.fills) {
				t.Errorf("fills %v, want %v", fills, tc.fills)
			}
		})
	}
}

func TestRunRefusesAPlanDeeperThanItsContextBeforeEvaluating(t *testing.T) {
	ev := &cacheEvaluator{}
	_, err := Run(context.Background(), ev, Config{NPrompt: 512, NGen: 128, Reps: 1, Depths: []int{0, 4096}, Context: 4096, VocabSize: 50}, nil)
	var ce *ContextError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ContextError", err)
	}
	for _, want := range []string{"pp512 @ d4096", "4608", "4096"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if len(ev.calls) != 0 || ev.resets != 0 {
		t.Errorf("the refused plan evaluated %d calls", len(ev.calls))
	}
	if _, err := Run(context.Background(), &cacheEvaluator{}, Config{NPrompt: 8, Reps: 1, Depths: []int{16}, Context: 24, VocabSize: 50}, nil); err != nil {
		t.Errorf("a plan that fits exactly was refused: %v", err)
	}
	if _, err := Run(context.Background(), &cacheEvaluator{}, Config{NPrompt: 8, Reps: 1, Depths: []int{-1}, VocabSize: 50}, nil); err == nil {
		t.Error("a negative depth was accepted")
	}
}

func TestRunCancelledDuringTheFillReturnsTheFinishedRecords(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ev := &countingEvaluator{cancelAt: 2 + 1, cancel: cancel} // pp4 warm-up and rep, then the first fill batch
	records, err := Run(ctx, ev, Config{NPrompt: 4, Reps: 1, Depths: []int{0, 2048}, VocabSize: 50}, nil)
	if !errors.Is(err, ErrCancelled) || !strings.Contains(err.Error(), "pp4 @ d2048") {
		t.Fatalf("err = %v, want ErrCancelled naming pp4 @ d2048", err)
	}
	if len(records) != 1 || records[0].TestName() != "pp4" {
		t.Errorf("records %+v, want the finished pp4", records)
	}
	if len(ev.calls) != 3 {
		t.Errorf("%d calls: the fill went on after the cancel", len(ev.calls))
	}
}

func TestOutputsCarryDepthAndLoadUnderLlamaBenchNames(t *testing.T) {
	rec := Record{ModelType: "llama 8B Q4_K", NGen: 128, NDepth: 4096, Summary: Summarize([]int64{1e9}, 128), Tool: "vkllm",
		ModelSize: 4.58e9, LoadMs: 1210, LoadGBps: 3.785}
	for _, tc := range []struct {
		format string
		want   []string
	}{
		{"md", []string{"tg128 @ d4096", "128.00 ± 0.00"}},
		{"json", []string{`"n_depth": 4096`, `"load_ms": 1210`, `"load_gbps": 3.785`}},
		{"jsonl", []string{`"n_depth":4096`, `"load_gbps":3.785`}},
		{"csv", []string{",n_depth,", ",load_ms,load_gbps", ",4096,", ",1210.000000,3.785000"}},
		{"sql", []string{"n_depth INTEGER", "load_gbps REAL", "'4096'", "'3.785000'"}},
	} {
		var buf bytes.Buffer
		if err := Write(&buf, tc.format, []Record{rec}); err != nil {
			t.Fatalf("Write %s: %v", tc.format, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s output lacks %q:\n%s", tc.format, w, buf.String())
			}
		}
	}
}
