package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
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
	cands  []candidate // every candidate, in id order
	sorted []candidate // the ones a cut can keep, sorted
	patch  []float32   // the logits with the penalised ones replaced
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
	if s.params.Greedy() {
		return argmax(s.patched(logits, s.penalties(logits)))
	}
	return s.SampleWith(logits, s.rng.Float64())
}

// Uniform returns the sampler's next uniform draw in [0, 1): the one the next Sample of a
// non-greedy chain would take. A runner that draws on its device takes its uniforms from here
// (SampleWith for the host's share), so a seed gives the same stream of draws either way.
func (s *Sampler) Uniform() float64 { return s.rng.Float64() }

// SampleWith is Sample with the draw's uniform u given instead of taken from the sampler's
// source (the chain and the repetition penalty as Sample applies them).
func (s *Sampler) SampleWith(logits []float32, u float64) int {
	if len(logits) == 0 {
		return -1
	}
	penalised := s.penalties(logits)
	if s.params.Greedy() {
		return argmax(s.patched(logits, penalised))
	}
	return draw(s.distribution(logits, penalised), u)
}

// distribution returns the candidates the chain keeps, each with its probability at the
// sampling temperature: by logit, descending (ties by id), except where neither top-k, top-p
// nor min-p cuts (every token kept, in id order). It sorts only what a cut can keep: the top-k
// by a bounded selection, or for top-p and min-p the tokens above a logit threshold (a whole
// vocabulary's sort took 166 ms a token at 128k tokens).
func (s *Sampler) distribution(logits []float32, penalised map[int]float32) []candidate {
	p := s.params
	if p.TopK > 0 {
		c := s.topCandidates(logits, penalised, p.TopK)
		softmax(c, 1, 0)
		c = topP(c, p.TopP)
		c = minP(c, p.MinP)
		softmax(c, p.Temperature, 0)
		return c
	}
	cutP, cutMin := p.TopP > 0 && p.TopP < 1, p.MinP > 0
	if !cutP && !cutMin {
		all := s.candidates(logits, penalised) // id order
		softmax(all, p.Temperature, 0)
		return all
	}
	vals := s.patched(logits, penalised)
	maxL, count := float32(math.Inf(-1)), 0
	for _, v := range vals {
		if v == v { // not NaN
			maxL = max(maxL, v)
			count++
		}
	}
	if count == 0 {
		return s.sorted[:0]
	}
	if math.IsInf(float64(maxL), 0) { // no finite normaliser: the top logits share the mass
		c := s.sorted[:0]
		for i, v := range vals {
			if v == maxL {
				c = append(c, candidate{id: i, logit: v})
			}
		}
		s.sorted = c
		softmax(c, p.Temperature, 0)
		return c
	}
	z := expSumValues(vals, float64(maxL)) // the normaliser over every candidate
	// Candidates at or above a logit threshold are a prefix of the sorted order. Min-p keeps
	// what is within ln(min_p) of the maximum (a threshold a little below that contains it);
	// top-p needs the prefix whose mass reaches top_p, so a threshold that does not reach it is
	// lowered until it does (or takes everything).
	gap := 10.0
	if cutMin {
		gap = -math.Log(float64(p.MinP)) + 1e-3
	}
	for {
		threshold := float64(maxL) - gap
		c := s.sorted[:0]
		for i, v := range vals {
			if float64(v) >= threshold { // false for NaN
				c = append(c, candidate{id: i, logit: v})
			}
		}
		sortCandidates(c)
		s.sorted = c
		softmax(c, 1, z)
		kept := topP(c, p.TopP)
		if cutMin || len(kept) < len(c) || len(c) == count || mass(c) >= float64(p.TopP) {
			kept = minP(kept, p.MinP)
			softmax(kept, p.Temperature, 0)
			return kept
		}
		gap *= 2
	}
}

// mass is the candidates' total probability.
func mass(c []candidate) float64 {
	var m float64
	for _, x := range c {
		m += x.p
	}
	return m
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
func Argmax(logits []float32) int { return argmax(logits) }

func argmax(logits []float32) int {
	best, bestV := -1, float32(math.Inf(-1))
	for i, v := range logits {
		if v != v { // NaN never wins
			continue
		}
		if best < 0 || v > bestV {
			best, bestV = i, v
		}
	}
	return best
}

// candidates lists the tokens with their (penalised) logits in id order, NaNs left out.
func (s *Sampler) candidates(logits []float32, override map[int]float32) []candidate {
	logits = s.patched(logits, override)
	c := s.cands[:0]
	for i, v := range logits {
		if v == v { // not NaN
			c = append(c, candidate{id: i, logit: v})
		}
	}
	s.cands = c
	return c
}

// patched returns logits with the overridden ones replaced (a copy of them, or logits itself
// where nothing is overridden): a map lookup for every token of the vocabulary cost more than
// the rest of the chain.
func (s *Sampler) patched(logits []float32, override map[int]float32) []float32 {
	if len(override) == 0 {
		return logits
	}
	s.patch = append(s.patch[:0], logits...)
	for id, v := range override {
		s.patch[id] = v
	}
	return s.patch
}

// before orders candidates by logit, descending, ties by id (the order a stable sort of the
// id-ordered list gives).
func before(a, b candidate) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

func sortCandidates(c []candidate) {
	slices.SortFunc(c, func(a, b candidate) int {
		switch {
		case before(a, b):
			return -1
		case before(b, a):
			return 1
		}
		return 0
	})
}

// topCandidates returns the k first candidates in sorted order (before), sorted: a bounded
// selection over the vocabulary, the worst kept one at the root of a heap.
func (s *Sampler) topCandidates(logits []float32, override map[int]float32, k int) []candidate {
	logits = s.patched(logits, override)
	h := s.sorted[:0]
	down := func(i int) { // restore the heap below i: every parent sorts after its children
		for {
			worst, l, r := i, 2*i+1, 2*i+2
			if l < len(h) && before(h[worst], h[l]) {
				worst = l
			}
			if r < len(h) && before(h[worst], h[r]) {
				worst = r
			}
			if worst == i {
				return
			}
			h[i], h[worst] = h[worst], h[i]
			i = worst
		}
	}
	for i, v := range logits {
		if v != v { // NaN
			continue
		}
		if len(h) == k && !before(candidate{id: i, logit: v}, h[0]) {
			continue
		}
		x := candidate{id: i, logit: v}
		if len(h) < k {
			h = append(h, x)
			for j := len(h) - 1; j > 0; { // up
				parent := (j - 1) / 2
				if !before(h[parent], h[j]) {
					break
				}
				h[parent], h[j] = h[j], h[parent]
				j = parent
			}
			continue
		}
		if before(x, h[0]) {
			h[0] = x
			down(0)
		}
	}
	sortCandidates(h)
	s.sorted = h
	return h
}

// softmax sets p from the logits divided by temp: exp(logit/temp - max/temp) over their sum,
// or over z where z > 0 (the sum over a larger set the candidates were taken from, at temp 1).
func softmax(c []candidate, temp float32, z float64) {
	if len(c) == 0 {
		return
	}
	if temp <= 0 {
		temp = 1
	}
	maxL := float64(c[0].logit) / float64(temp)
	for _, x := range c[1:] {
		maxL = math.Max(maxL, float64(x.logit)/float64(temp))
	}
	if math.IsInf(maxL, 0) { // the infinite logits (or, all -Inf, every one) share the mass
		n := 0.0
		for i := range c {
			c[i].p = 0
			if float64(c[i].logit)/float64(temp) == maxL {
				c[i].p = 1
				n++
			}
		}
		for i := range c {
			c[i].p /= n
		}
		return
	}
	sum := expSum(c, temp, maxL)
	if z > 0 {
		sum = z
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

// expPieces is how many pieces a long sum of exponentials is cut into: a fixed number, so the
// sum's order, and so its bits, do not depend on the machine's cores.
const expPieces = 8

// piecewiseSum returns the sum of part over [0, n): a short range in one piece, a long one (a
// whole vocabulary's exponentials, 128k-248k, most of a draw's time) in expPieces pieces on as
// many goroutines, their sums added in order.
func piecewiseSum(n int, part func(lo, hi int) float64) float64 {
	if n < 1<<14 {
		return part(0, n)
	}
	var sums [expPieces]float64
	var wg sync.WaitGroup
	size := (n + expPieces - 1) / expPieces
	for k := range sums {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[k] = part(min(k*size, n), min((k+1)*size, n))
		}()
	}
	wg.Wait()
	var sum float64
	for _, x := range sums {
		sum += x
	}
	return sum
}

// expSum sets each candidate's p to exp(logit/temp - maxL) and returns their sum.
func expSum(c []candidate, temp float32, maxL float64) float64 {
	return piecewiseSum(len(c), func(lo, hi int) float64 {
		var sum float64
		for i := lo; i < hi; i++ {
			c[i].p = math.Exp(float64(c[i].logit)/float64(temp) - maxL)
			sum += c[i].p
		}
		return sum
	})
}

// expSumValues is the sum of exp(v - maxL) over raw logits, NaNs left out.
func expSumValues(v []float32, maxL float64) float64 {
	return piecewiseSum(len(v), func(lo, hi int) float64 {
		var sum float64
		for _, x := range v[lo:hi] {
			if x == x {
				sum += math.Exp(float64(x) - maxL)
			}
		}
		return sum
	})
}
