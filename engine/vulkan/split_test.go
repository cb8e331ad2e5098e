package vulkan

import (
	"math"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/cpu"
	"github.com/vkllm/vkllm/engine/model"
)

// greedy runs prompt then steps greedy tokens through r, returning the generated ids.
func greedy(t *testing.T, r model.Runner, prompt []int, steps int) []int {
	t.Helper()
	r.Reset()
	logits, err := r.Eval(prompt, 0, false)
	if err != nil {
		t.Fatalf("%s prefill: %v", r.Name(), err)
	}
	var out []int
	pos := len(prompt)
	for i := 0; i < steps; i++ {
		tok := argmax(logits)
		out = append(out, tok)
		if logits, err = r.Eval([]int{tok}, pos, false); err != nil {
			t.Fatalf("%s decode at %d: %v", r.Name(), pos, err)
		}
		pos++
	}
	return out
}

// The split (CPU layers first, device layers after, head on either side) continues the shared
// models' reference prompts with the same greedy tokens as the resident driver and the CPU
// path, and its every-position logits stay within the resident driver's tolerance.
func TestSplitGreedyMatchesResidentAndCPU(t *testing.T) {
	c := ctxOrSkip(t)
	const steps = 12
	for _, name := range []string{"stories260K", "rand-llama-q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := loadShared(t, name)
			ref := readRef(t, name)[0]
			res, err := NewResident(c, m, ResidentOptions{Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			want := greedy(t, res, ref.PromptTokens, steps)
			cr, err := cpu.New(m, cpu.Options{Threads: 2, Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer cr.Close()
			if got := greedy(t, cr, ref.PromptTokens, steps); !equalInts(got, want) {
				t.Fatalf("cpu greedy %v, resident %v", got, want)
			}
			resAll, err := res.Eval(ref.PromptTokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			cpuAll, err := cr.Eval(ref.PromptTokens, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			// The device and the CPU are each held within logitTol of llama.cpp's logits, so a mix
			// of the two stays within twice that of either (for q8_0 a last-bit difference
			// flips an activation's 8-bit rounding: measured 0.21 on lavapipe, 0.25 on an H200
			// whose prefill runs the cooperative-matrix tier).
			tol := 2 * logitTol[name]
			L := m.Hyper.Layers
			for _, tc := range []struct {
				first int
				head  bool
			}{{1, true}, {L - 1, false}, {0, false}} {
				s, err := NewSplit(c, m, SplitOptions{Context: 64, FirstGPULayer: tc.first, HeadOnGPU: tc.head})
				if err != nil {
					t.Fatal(err)
				}
				got := greedy(t, s, ref.PromptTokens, steps)
				all, err := s.Eval(ref.PromptTokens, 0, true)
				s.Close()
				if err != nil {
					t.Fatal(err)
				}
				if !equalInts(got, want) {
					t.Errorf("split at layer %d (head on GPU %v): greedy %v, resident %v", tc.first, tc.head, got, want)
				}
				if len(all) != len(resAll) {
					t.Fatalf("split all-logits length %d, resident %d", len(all), len(resAll))
				}
				worstRes, worstCPU := 0.0, 0.0
				for i := range all {
					worstRes = math.Max(worstRes, math.Abs(float64(all[i]-resAll[i])))
					worstCPU = math.Max(worstCPU, math.Abs(float64(all[i]-cpuAll[i])))
				}
				if worstRes > tol || worstCPU > tol {
					t.Errorf("split at layer %d (head on GPU %v): max |logit - resident| %.3g, |logit - cpu| %.3g, over %g", tc.first, tc.head, worstRes, worstCPU, tol)
				}
				t.Logf("split at layer %d (head on GPU %v): max |logit - resident| %.3g, |logit - cpu| %.3g", tc.first, tc.head, worstRes, worstCPU)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSplitRejectsBadPlacementAndInput(t *testing.T) {
	c := ctxOrSkip(t)
	m := loadShared(t, "stories260K")
	for _, first := range []int{-1, m.Hyper.Layers} {
		if s, err := NewSplit(c, m, SplitOptions{Context: 16, FirstGPULayer: first}); err == nil {
			s.Close()
			t.Errorf("first GPU layer %d: no error", first)
		}
	}
	s, err := NewSplit(c, m, SplitOptions{Context: 16, FirstGPULayer: 2, HeadOnGPU: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name   string
		tokens []int
		pos    int
	}{
		{"no tokens", nil, 0},
		{"token past vocabulary", []int{m.Hyper.VocabSize}, 0},
		{"past the context", []int{1, 2}, 15},
		{"negative position", []int{1}, -1},
	} {
		if _, err := s.Eval(tc.tokens, tc.pos, false); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, err := s.dev.EvalHidden(make([]float32, 3), 1, 0, false); err == nil {
		t.Error("hidden states of the wrong length: no error")
	}
	if _, err := s.dev.Eval([]int{1}, 0, false); err == nil {
		t.Error("tokens into a part runner: no error")
	}
}

// Both runners hand their warm-up hook the re-read device exactly once, after the first
// decode pass (a prefill alone is no warm-up), and never on later decodes.
func TestAfterWarmupRunsOnceAfterTheFirstDecode(t *testing.T) {
	c := ctxOrSkip(t)
	m := loadShared(t, "stories260K")
	var calls []DeviceInfo
	hook := func(after DeviceInfo) { calls = append(calls, after) }
	res, err := NewResident(c, m, ResidentOptions{Context: 16, AfterWarmup: hook})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	s, err := NewSplit(c, m, SplitOptions{Context: 16, FirstGPULayer: 3, AfterWarmup: hook})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range []model.Runner{res, s} {
		calls = nil
		if _, err := r.Eval([]int{1, 403, 407}, 0, false); err != nil {
			t.Fatal(err)
		}
		if len(calls) != 0 {
			t.Fatalf("%s: warm-up hook ran after a prefill", r.Name())
		}
		for pos := 3; pos < 6; pos++ {
			if _, err := r.Eval([]int{261}, pos, false); err != nil {
				t.Fatal(err)
			}
		}
		if len(calls) != 1 {
			t.Fatalf("%s: warm-up hook ran %d times over three decodes, want once", r.Name(), len(calls))
		}
		if calls[0].Key() != c.Info.Key() || len(calls[0].Heaps) == 0 {
			t.Fatalf("%s: warm-up hook got device %q with %d heaps, want %q re-read", r.Name(), calls[0].Key(), len(calls[0].Heaps), c.Info.Key())
		}
	}
}

// A prompt longer than a CPU batch (32 tokens) and than the device window runs in several
// pieces and gives the resident driver's logits at every position, and the same logits as
// feeding it one token at a time.
func TestSplitPrefillAcrossBatchesAndWindowsEqualsResident(t *testing.T) {
	c := ctxOrSkip(t)
	m := loadShared(t, "stories260K")
	tokens := make([]int, 41)
	for i := range tokens {
		tokens[i] = (i*37 + 1) % m.Hyper.VocabSize
	}
	res, err := NewResident(c, m, ResidentOptions{Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	want, err := res.Eval(tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSplit(c, m, SplitOptions{Context: 64, FirstGPULayer: 2, Window: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Eval(tokens, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("split %d logits, resident %d", len(got), len(want))
	}
	vocab := m.Hyper.VocabSize
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > logitTol["stories260K"] {
			t.Fatalf("position %d logit %d: split %v, resident %v", i/vocab, i%vocab, got[i], want[i])
		}
	}
	for i, tok := range tokens {
		one, err := s.Eval([]int{tok}, i, false)
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range one {
			if d := math.Abs(float64(v - got[i*vocab+j])); d > 1e-3 {
				t.Fatalf("position %d logit %d: one at a time %v, prefill %v", i, j, v, got[i*vocab+j])
			}
		}
	}
}

// The split keeps the CPU runner's cache rules: a rewind recomputes the same logits, a
// position past the cached ones is an error naming them, and Reset empties the cache.
func TestSplitRewindsAndRejectsSkippingAhead(t *testing.T) {
	c := ctxOrSkip(t)
	m := loadShared(t, "stories260K")
	s, err := NewSplit(c, m, SplitOptions{Context: 16, FirstGPULayer: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Eval([]int{1, 403, 407}, 0, false); err != nil {
		t.Fatal(err)
	}
	first, err := s.Eval([]int{261}, 3, false) // one token, as the rewind below
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Eval([]int{300, 301}, 4, false); err != nil {
		t.Fatal(err)
	}
	again, err := s.Eval([]int{261}, 3, false) // rewind over the fourth token
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if first[i] != again[i] {
			t.Fatalf("logit %d after rewind %v, first time %v", i, again[i], first[i])
		}
	}
	if _, err := s.Eval([]int{300}, 6, false); err == nil || !strings.Contains(err.Error(), "outside the 4 cached positions") {
		t.Fatalf("position 6 with 4 cached: error %v, want the 4 cached positions named", err)
	}
	s.Reset()
	if _, err := s.Eval([]int{300}, 1, false); err == nil || !strings.Contains(err.Error(), "outside the 0 cached positions") {
		t.Fatalf("position 1 after Reset: error %v, want the 0 cached positions named", err)
	}
}
