package sample

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Sampler picks tokens from logits under one set of Params. It remembers the tokens it has been
// told about (Accept) for the repetition penalty, and owns a random source seeded once, so the
// same seed, prompt and logits always give the same tokens.
type Sampler struct {
	params  Params
	rng     *rand.Rand
	history []int

	// scratch reused between calls
	cands []candidate
}

type candidate struct {
	id    int
	logit float32
	p     float64
}

// New returns a sampler for p. A zero Seed draws one from the clock.
func New(p Params) *Sampler {
	seed := p.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return &Sampler{params: p, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Params returns the settings the sampler was made with.
func (s *Sampler) Params() Params { return s.params }

// Accept records a token that is now part of the sequence (prompt or generated), for the
// repetition penalty.
func (s *Sampler) Accept(ids ...int) {
	s.history = append(s.history, ids...)
	// keep the history bounded: only the last window is ever consulted
	if keep := 4 * s.window(); len(s.history) > keep && keep > 0 {
		s.history = append(s.history[:0], s.history[len(s.history)-s.window():]...)
	}
}

// Reset forgets the accepted tokens (the random source keeps its state).
func (s *Sampler) Reset() { s.history = s.history[:0] }

func (s *Sampler) window() int {
	if s.params.RepeatLastN > 0 {
		return s.params.RepeatLastN
	}
	return 64
}

// Sample returns the next token id for these logits. logits is not modified.
//
// The order is llama.cpp's default chain: repetition penalty, then (when not greedy) top-k,
// top-p, min-p, temperature and a draw from the remaining distribution.
func (s *Sampler) Sample(logits []float32) int {
	if len(logits) == 0 {
		return -1
	}
	penalised := s.penalties(logits)
	if s.params.Greedy() {
		return argmaxWith(logits, penalised)
	}
	c := s.candidates(logits, penalised)
	c = topK(c, s.params.TopK)
	softmax(c, 1)
	c = topP(c, s.params.TopP)
	c = minP(c, s.params.MinP)
	softmax(c, s.params.Temperature)
	return draw(c, s.rng.Float64())
}

// penalties returns the penalised logits of the recently seen tokens (id -> new logit), following
// the CTRL-paper rule llama.cpp uses: a positive logit is divided by the penalty, a negative one
// multiplied, once per distinct token.
func (s *Sampler) penalties(logits []float32) map[int]float32 {
	pen := s.params.RepeatPenalty
	if pen == 0 || pen == 1 || len(s.history) == 0 {
		return nil
	}
	start := max(0, len(s.history)-s.window())
	out := make(map[int]float32)
	for _, id := range s.history[start:] {
		if id < 0 || id >= len(logits) {
			continue
		}
		if _, done := out[id]; done {
			continue
		}
		l := logits[id]
		if l > 0 {
			l /= pen
		} else {
			l *= pen
		}
		out[id] = l
	}
	return out
}

// Argmax returns the index of the largest value (the first on ties), or -1 for an empty slice.
func Argmax(logits []float32) int { return argmaxWith(logits, nil) }

func argmaxWith(logits []float32, override map[int]float32) int {
	best, bestV := -1, float32(math.Inf(-1))
	for i, v := range logits {
		if o, ok := override[i]; ok {
			v = o
		}
		if v != v { // NaN never wins
			continue
		}
		if best < 0 || v > bestV {
			best, bestV = i, v
		}
	}
	return best
}

func (s *Sampler) candidates(logits []float32, override map[int]float32) []candidate {
	c := s.cands[:0]
	for i, v := range logits {
		if o, ok := override[i]; ok {
			v = o
		}
		if math.IsNaN(float64(v)) {
			continue
		}
		c = append(c, candidate{id: i, logit: v})
	}
	sort.SliceStable(c, func(i, j int) bool { return c[i].logit > c[j].logit })
	s.cands = c
	return c
}

// topK keeps the k most likely candidates (c is sorted by logit, descending).
func topK(c []candidate, k int) []candidate {
	if k > 0 && k < len(c) {
		return c[:k]
	}
	return c
}

// softmax sets p from the logits divided by temp (c sorted descending, so c[0] is the maximum).
func softmax(c []candidate, temp float32) {
	if len(c) == 0 {
		return
	}
	if temp <= 0 {
		temp = 1
	}
	maxL := float64(c[0].logit) / float64(temp)
	var sum float64
	for i := range c {
		c[i].p = math.Exp(float64(c[i].logit)/float64(temp) - maxL)
		sum += c[i].p
	}
	for i := range c {
		c[i].p /= sum
	}
}

// topP keeps the smallest prefix whose probability mass reaches p (at least one candidate).
func topP(c []candidate, p float32) []candidate {
	if p <= 0 || p >= 1 {
		return c
	}
	var cum float64
	for i := range c {
		cum += c[i].p
		if cum >= float64(p) {
			return c[:i+1]
		}
	}
	return c
}

// minP keeps the candidates whose probability is at least p times the most likely one's.
func minP(c []candidate, p float32) []candidate {
	if p <= 0 || len(c) == 0 {
		return c
	}
	limit := c[0].p * float64(p)
	for i := 1; i < len(c); i++ {
		if c[i].p < limit {
			return c[:i]
		}
	}
	return c
}

// draw picks a candidate by its probability with u uniform in [0,1).
func draw(c []candidate, u float64) int {
	if len(c) == 0 {
		return -1
	}
	var total float64
	for _, x := range c {
		total += x.p
	}
	u *= total
	var cum float64
	for _, x := range c {
		cum += x.p
		if u < cum {
			return x.id
		}
	}
	return c[len(c)-1].id
}
