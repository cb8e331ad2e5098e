package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
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

// BenchmarkSample times one draw over a 128256-token vocabulary (llama 3's) under the app's
// chat defaults and with top-k off.
func BenchmarkSample(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 128256)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	for _, tc := range []struct {
		name string
		p    Params
	}{
		{"app-chat-defaults", Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05, Seed: 3}},
		{"top-k-40-penalty", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, Seed: 3}},
		{"temperature-only", Params{Temperature: 1, Seed: 3}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := New(tc.p)
			s.Accept(1, 2, 3, 500, 9000)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s.Sample(logits)
			}
		})
	}
}

// referenceDistribution is the chain as first written: every candidate stable-sorted by logit,
// then top-k, top-p, min-p and the temperature over what is left.
func referenceDistribution(logits []float32, penalised map[int]float32, p Params) []candidate {
	var c []candidate
	for i, v := range logits {
		if o, ok := penalised[i]; ok {
			v = o
		}
		if !math.IsNaN(float64(v)) {
			c = append(c, candidate{id: i, logit: v})
		}
	}
	sort.SliceStable(c, func(i, j int) bool { return c[i].logit > c[j].logit })
	if p.TopK > 0 && p.TopK < len(c) {
		c = c[:p.TopK]
	}
	softmax(c, 1, 0)
	c = topP(c, p.TopP)
	c = minP(c, p.MinP)
	softmax(c, p.Temperature, 0)
	return c
}

// The chain keeps the same candidates, in the same order and with the same probabilities, as a
// sort of the whole vocabulary does: random logits with ties and NaNs, a repetition penalty,
// every combination of the cuts. Where nothing cuts, the kept set is every candidate (its order
// is the id order, so the sets are compared).
func TestDistributionEqualsWholeSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 12; trial++ {
		logits := make([]float32, 3000)
		for i := range logits {
			logits[i] = float32(math.Round(rng.NormFloat64()*float64(1+trial)*4) / 4) // steps of 0.25: ties
			if rng.IntN(200) == 0 {
				logits[i] = float32(math.NaN())
			}
		}
		for _, k := range []int{0, 1, 5, 40} {
			for _, tp := range []float32{0, 0.3, 0.9, 0.999, 1} {
				for _, mp := range []float32{0, 0.05, 0.3} {
					for _, temp := range []float32{0.5, 1, 1.5} {
						p := Params{Temperature: temp, TopK: k, TopP: tp, MinP: mp, RepeatPenalty: 1.3, Seed: 1}
						s := New(p)
						s.Accept(3, 17, 17, 2500)
						pen := s.penalties(logits)
						got := append([]candidate(nil), s.distribution(logits, pen)...)
						want := referenceDistribution(logits, pen, p)
						if k == 0 && (tp == 0 || tp == 1) && mp == 0 {
							byID := func(a, b candidate) int { return a.id - b.id }
							slices.SortFunc(got, byID)
							slices.SortFunc(want, byID)
						}
						if len(got) != len(want) {
							t.Fatalf("trial %d %+v: %d candidates kept, the whole sort keeps %d", trial, p, len(got), len(want))
						}
						for i := range want {
							if got[i].id != want[i].id || math.Abs(got[i].p-want[i].p) > 1e-12 {
								t.Fatalf("trial %d %+v: candidate %d is %d (p %g), the whole sort's %d (p %g)", trial, p, i, got[i].id, got[i].p, want[i].id, want[i].p)
							}
						}
					}
				}
			}
		}
	}
}

// Infinite logits end a draw like finite ones (the cut search lowers its threshold until it
// holds everything, never forever): a lone +Inf wins, all -Inf still picks a token.
func TestSampleWithInfiniteLogitsEnds(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name   string
		logits []float32
		want   int // -2: any valid id
	}{
		{"one +Inf", []float32{0, 1, inf, 2, float32(math.NaN())}, 2},
		{"all -Inf", []float32{-inf, -inf, -inf}, -2},
		{"-Inf among finite", []float32{-inf, 3, -inf, 1}, -2},
	} {
		for _, p := range []Params{{Temperature: 0.7, TopP: 0.9}, {Temperature: 0.7, MinP: 0.05}, {Temperature: 0.7, TopP: 0.5, MinP: 0.1}, {Temperature: 1}, {Temperature: 1, TopK: 2}} {
			p.Seed = 9
			done := make(chan int, 1)
			go func() { done <- New(p).Sample(tc.logits) }()
			select {
			case got := <-done:
				if (tc.want >= 0 && got != tc.want) || got < 0 || got >= len(tc.logits) || math.IsNaN(float64(tc.logits[got])) {
					t.Errorf("%s %+v: sampled %d", tc.name, p, got)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s %+v: the draw did not end", tc.name, p)
			}
		}
	}
}
