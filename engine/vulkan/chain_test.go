package vulkan

import (
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// A greedy generation on the chain (VKLLM_GPU_CHAIN: each step queued behind the one before,
// its token copied in on the device) gives the same tokens as one submit and wait a step, and
// the chain is what ran: every step after the first was the one queued ahead. The step queued
// past the last one leaves nothing behind: an evaluation of another token at its position
// (Eval, or Greedy with a token the chain did not feed) gives the same logits and token as on
// a runner that never queued it. Dense llama and qwen3moe (its routing and the last-arrival
// counts run twice per step pair). Fails if the chain is not wired.
func TestGreedyChainMatchesOneStepAtATime(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(on bool) { c.chain = on }(c.chain)
	dir := t.TempDir()
	prompt := []int{1, 262, 300, 275, 307}
	const steps = 10
	for _, arch := range []string{"llama", "qwen3moe"} {
		t.Run(arch, func(t *testing.T) {
			m := loadTiny(t, dir, arch, quant.Q8_0, 7)
			vocab := m.Hyper.VocabSize
			runners := map[bool]*Resident{}
			tokens := map[bool][]int{}
			for _, on := range []bool{false, true} {
				c.chain = on
				r, err := NewResident(c, m, ResidentOptions{Context: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				runners[on] = r
				lg, err := r.Eval(prompt, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				tok := slices.Index(lg, slices.Max(lg))
				for i := 0; i < steps; i++ {
					tokens[on] = append(tokens[on], tok)
					if tok, err = r.Greedy(tok, len(prompt)+i); err != nil {
						t.Fatalf("chain %v, step %d: %v", on, i, err)
					}
				}
				tokens[on] = append(tokens[on], tok)
			}
			if !slices.Equal(tokens[true], tokens[false]) {
				t.Fatalf("greedy tokens %v on the chain, %v one step at a time", tokens[true], tokens[false])
			}
			if ch := runners[true].chain; ch == nil || ch.taken != steps-1 || ch.queued != steps {
				t.Fatalf("the chain did not run the generation: %+v (want %d steps taken as queued, %d queued)", ch, steps-1, steps)
			}
			if runners[false].chain != nil {
				t.Fatal("with the switch off the runner recorded the chain")
			}
			// the step queued at len(prompt)+steps was never taken: another token there
			at := len(prompt) + steps
			other := (tokens[true][steps] + 1) % vocab
			want, err := runners[false].Eval([]int{other}, at, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := runners[true].Eval([]int{other}, at, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Eval of token %d at %d after the chain queued a step there: logits differ from the unchained runner's", other, at)
			}
			// Greedy with a token the chain did not feed, at the position it queued
			if _, err := runners[true].Greedy(other, at); err != nil {
				t.Fatal(err)
			}
			other2 := (other + 3) % vocab
			wantTok, err := runners[false].Greedy(other2, at+1)
			if err != nil {
				t.Fatal(err)
			}
			gotTok, err := runners[true].Greedy(other2, at+1)
			if err != nil {
				t.Fatal(err)
			}
			if gotTok != wantTok {
				t.Fatalf("Greedy(%d, %d) against a queued step of another token: %d, unchained %d", other2, at+1, gotTok, wantTok)
			}
			// closing with a step queued waits for it; the closed runner refuses more
			if err := runners[true].Close(); err != nil {
				t.Fatalf("close with a step queued: %v", err)
			}
			if _, err := runners[true].Greedy(gotTok, at+2); err == nil {
				t.Fatal("Greedy on a closed runner: no error")
			}
		})
	}
}
