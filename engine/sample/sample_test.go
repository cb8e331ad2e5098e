package sample

import (
	"math"
	"testing"
)

func TestGreedyPicksLargestLogit(t *testing.T) {
	cases := []struct {
		name   string
		logits []float32
		want   int
	}{
		{"single", []float32{0.5}, 0},
		{"middle", []float32{-1, 3, 2}, 1},
		{"last", []float32{-5, -4, -3}, 2},
		{"first of a tie", []float32{1, 7, 7}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := New(Params{Seed: 1}).Sample(tc.logits); got != tc.want {
				t.Fatalf("greedy = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRepetitionPenaltyDemotesSeenTokens(t *testing.T) {
	logits := []float32{2.0, 1.9, -1}
	s := New(Params{RepeatPenalty: 1.5, Seed: 1})
	if got := s.Sample(logits); got != 0 {
		t.Fatalf("before any history: %d, want 0", got)
	}
	s.Accept(0)
	// 2.0/1.5 = 1.33 < 1.9, so token 1 now wins
	if got := s.Sample(logits); got != 1 {
		t.Fatalf("after accepting 0: %d, want 1", got)
	}
	if logits[0] != 2.0 {
		t.Fatalf("Sample modified the caller's logits: %v", logits)
	}
}

func TestRepetitionPenaltyMultipliesNegativeLogits(t *testing.T) {
	s := New(Params{RepeatPenalty: 2, Seed: 1})
	s.Accept(0)
	got := s.penalties([]float32{-1, 0})
	if got[0] != -2 {
		t.Fatalf("penalised negative logit = %v, want -2", got[0])
	}
}

func TestRepetitionPenaltyOnlyLooksBackOverTheWindow(t *testing.T) {
	s := New(Params{RepeatPenalty: 10, RepeatLastN: 2, Seed: 1})
	s.Accept(0, 3, 3)
	if got := s.Sample([]float32{2, 1, 0, 0}); got != 0 {
		t.Fatalf("token 0 fell out of the window but was penalised: got %d", got)
	}
}

func TestSameSeedGivesSameSequence(t *testing.T) {
	logits := []float32{1, 1.1, 0.9, 1.05, 0.2, 0.8}
	p := Params{Temperature: 1, Seed: 42}
	a, b := New(p), New(p)
	for i := 0; i < 50; i++ {
		x, y := a.Sample(logits), b.Sample(logits)
		if x != y {
			t.Fatalf("step %d: %d vs %d with the same seed", i, x, y)
		}
	}
}

func TestDifferentSeedsDiverge(t *testing.T) {
	logits := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	a, b := New(Params{Temperature: 1, Seed: 1}), New(Params{Temperature: 1, Seed: 2})
	same := 0
	for i := 0; i < 64; i++ {
		if a.Sample(logits) == b.Sample(logits) {
			same++
		}
	}
	if same == 64 {
		t.Fatal("two seeds produced identical draws over 64 uniform steps")
	}
}

func TestTopKRestrictsToKMostLikely(t *testing.T) {
	logits := []float32{5, 4, 3, 2, 1, 0}
	s := New(Params{Temperature: 5, TopK: 2, Seed: 7})
	for i := 0; i < 500; i++ {
		if id := s.Sample(logits); id != 0 && id != 1 {
			t.Fatalf("top-k 2 sampled token %d", id)
		}
	}
}

func TestTopPKeepsSmallestPrefixReachingMass(t *testing.T) {
	// probabilities ~ 0.665, 0.245, 0.090 at temperature 1
	logits := []float32{2, 1, 0}
	s := New(Params{Temperature: 1, TopP: 0.8, Seed: 3})
	seen := map[int]bool{}
	for i := 0; i < 2000; i++ {
		seen[s.Sample(logits)] = true
	}
	if seen[2] {
		t.Fatal("top-p 0.8 sampled the token outside the 0.91 prefix")
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("top-p 0.8 should keep tokens 0 and 1, saw %v", seen)
	}
}

func TestMinPDropsUnlikelyTokens(t *testing.T) {
	// p1/p0 = e^-1 ~ 0.37 survives min-p 0.3; p2/p0 = e^-3 ~ 0.05 does not
	logits := []float32{3, 2, 0}
	s := New(Params{Temperature: 1, MinP: 0.3, Seed: 5})
	for i := 0; i < 2000; i++ {
		if s.Sample(logits) == 2 {
			t.Fatal("min-p 0.3 sampled a token at 5% of the top probability")
		}
	}
}

func TestTemperatureSharpensAndFlattens(t *testing.T) {
	logits := []float32{1, 0}
	freq := func(temp float32) float64 {
		s := New(Params{Temperature: temp, Seed: 11})
		n := 0
		for i := 0; i < 4000; i++ {
			if s.Sample(logits) == 0 {
				n++
			}
		}
		return float64(n) / 4000
	}
	cold, warm := freq(0.25), freq(4)
	// exact: 1/(1+e^-4) = 0.982, 1/(1+e^-0.25) = 0.562
	if math.Abs(cold-0.982) > 0.02 || math.Abs(warm-0.562) > 0.04 {
		t.Fatalf("token-0 frequency cold %.3f (want ~0.982) warm %.3f (want ~0.562)", cold, warm)
	}
}

func TestSampleSkipsNaNLogits(t *testing.T) {
	nan := float32(math.NaN())
	s := New(Params{Temperature: 1, Seed: 9})
	for i := 0; i < 100; i++ {
		if id := s.Sample([]float32{nan, 0, nan}); id != 1 {
			t.Fatalf("sampled NaN logit %d", id)
		}
	}
}

func TestEmptyLogitsReturnMinusOne(t *testing.T) {
	if got := New(Params{}).Sample(nil); got != -1 {
		t.Fatalf("empty logits: %d", got)
	}
}

func TestGreedyIgnoresNaN(t *testing.T) {
	nan := float32(math.NaN())
	if got := New(Params{}).Sample([]float32{nan, -3, nan, -4}); got != 1 {
		t.Fatalf("greedy with NaNs = %d, want 1", got)
	}
}
