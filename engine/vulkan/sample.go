package vulkan

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/vkllm/vkllm/engine/sample"
)

// Sampled generation on the device (VKLLM_GPU_SAMPLE). A sampled step used to be a submit, a
// wait, a read of the vocabulary's logits (half a megabyte at 128k tokens) and the host's draw
// (a pass of exponentials over the whole vocabulary for top-p's mass) before the next step
// could be submitted. Here each step ends in sample_token, which draws the next token from
// its logits as engine/sample does, with the uniform the host's sampler would have used, and
// the step is chained as greedy generation's is (chain.go): its draw is copied into the other
// slot's token id and that slot's step is queued behind it.
//
// sample_token hands the draw back to the host where more than sampleMaxCandidates tokens pass
// the cut's logit threshold (a nearly flat distribution) or a logit is infinite: the host then
// draws from the slot's logits with the same uniform, and the step queued ahead, which took
// the argmax, is discarded unless that is the token drawn; the step after a host's draw is
// not queued ahead until the device draws again.

// sampleMaxCandidates is the most candidates sample_token sorts (its CAP); sampleCandidates
// the most a recording lets it take before it hands the draw to the host (a variable for tests).
const sampleMaxCandidates = 1024

var sampleCandidates = sampleMaxCandidates

// sample_token's status word (out[1]).
const (
	sampleDrawn   = 0
	sampleByHost  = 1
	sampleNoLogit = 2
)

// SampleToken records sample_token: out[0] the token drawn from logits' n values under the
// settings in cfg (16 bytes: temperature, top-k, top-p, min-p; sampleSettings) with the
// uniform in u (4 bytes), out[1] its status.
func (s *Seq) SampleToken(logits, cfg, u, out Binding, n int) {
	if n <= 0 || logits.Size < uint64(4*n) || cfg.Size < 16 || u.Size < 4 || out.Size < 8 {
		s.fail(fmt.Errorf("sample a token of %d logits: a binding is too small", n))
		return
	}
	kern := s.kernel("sample_token", 4, 8)
	if kern == nil {
		return
	}
	s.Dispatch(kern, Push(uint32(n), uint32(min(sampleCandidates, sampleMaxCandidates))), 1, 1, 1, logits, cfg, u, out)
}

// sampleSettings encodes p for sample_token's settings buffer.
func sampleSettings(p sample.Params) []uint32 {
	return []uint32{math.Float32bits(p.Temperature), uint32(p.TopK), math.Float32bits(p.TopP), math.Float32bits(p.MinP)}
}

// sampleInputs are what a sampled chain's step hands sample_token besides its logits: the
// chain's settings and the slot's uniform.
type sampleInputs struct{ cfg, u *Buffer }

// SamplesOnDevice reports whether Sample draws p's tokens on the device: VKLLM_GPU_SAMPLE on,
// a runner that chains its steps, a temperature above 0, no repetition penalty (the device
// does not see the generation's history) and top-k within sample_token's candidates.
func (r *Resident) SamplesOnDevice(p sample.Params) bool {
	return r.c.sampleOnDevice && r.chains() && !p.Greedy() && (p.RepeatPenalty == 0 || p.RepeatPenalty == 1) &&
		p.TopK <= sampleMaxCandidates && p.Validate() == nil
}

// Sample evaluates token at pos like Greedy and returns the next token drawn from its logits
// under p (SamplesOnDevice) with the uniform u, which the caller takes from its
// sample.Sampler (Uniform). The step at pos+1, with that token and the uniform uNext, is
// queued behind it before Sample returns, so a sampled generation's next call, Sample(the
// token it got, pos+1, p, uNext, the next uniform), finds it queued or running. -1 means the
// logits held no number.
func (r *Resident) Sample(token, pos int, p sample.Params, u, uNext float64) (int, error) {
	if r.closed {
		return 0, errors.New("vulkan sample: runner is closed")
	}
	if !r.SamplesOnDevice(p) {
		return 0, fmt.Errorf("vulkan sample: this runner does not draw %+v on its device (SamplesOnDevice)", p)
	}
	if err := r.checkTokens([]int{token}, pos); err != nil {
		return 0, err
	}
	next, err := r.sampleChained(token, pos, p, u, uNext)
	if err != nil {
		return 0, err
	}
	r.lastRows = 1
	r.markWarm()
	return next, nil
}

// sampleChained is Sample on the sampled chain, as greedyChained is Greedy on the greedy one.
func (r *Resident) sampleChained(token, pos int, p sample.Params, u, uNext float64) (int, error) {
	ch, err := r.chainFor(true)
	if err != nil {
		return 0, err
	}
	if words := sampleSettings(p); !slices.Equal(words, ch.cfgWords) {
		// the steps queued read the settings: let them finish first
		if err := r.settle(); err != nil {
			return 0, err
		}
		if err := ch.cfg.WriteU32(0, words); err != nil {
			return 0, err
		}
		ch.cfgWords, ch.host = words, nil
	}
	// After a draw the host made, the next is likely the host's too (a flat distribution), and a
	// step queued ahead with the device's argmax would then be run in vain: queue none.
	out, sl, err := r.chainStep(ch, token, pos, float32(u), float32(uNext), !ch.lastByHost)
	if err != nil {
		return 0, err
	}
	ch.lastByHost = out[1] == sampleByHost
	switch out[1] {
	case sampleDrawn:
		return int(out[0]), nil
	case sampleNoLogit:
		return -1, nil
	}
	// the host draws: the slot's logits stay until its next step, which is not yet queued; they
	// come back through the runner's host-visible logits, which no chained step writes
	n := uint64(4 * r.h.VocabSize)
	if err := r.c.copyNow(sl.logits, 0, r.logits, 0, n); err != nil {
		r.settle()
		return 0, fmt.Errorf("vulkan sample: read the step's logits back: %w", err)
	}
	logits, err := r.logits.ReadF32(0, r.h.VocabSize)
	if err != nil {
		r.settle()
		return 0, err
	}
	if ch.host == nil {
		ch.host = sample.New(p)
	}
	ch.hostDraws++
	return ch.host.SampleWith(logits, u), nil
}
