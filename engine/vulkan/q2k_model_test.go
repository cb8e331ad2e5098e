package vulkan

import (
	"math"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// q2kCPUTolerance bounds |gpu − cpu| on every logit of the tiny llama in Q2_K and
// q2kCPUNearTie is the CPU's top-2 gap under which a step ends the greedy comparison with
// either leading token accepted, for the reasons q3kCPUTolerance gives: both sides round the
// activations to the same Q8_K blocks and sum in different orders, so an activation whose
// 8-bit rounding flips on a last-bit difference moves later logits by a few tenths (measured on
// lavapipe: exact tier 0.24, fast tier 0.32).
const (
	q2kCPUTolerance = 0.5
	q2kCPUNearTie   = 0.3
)

// The resident driver runs a llama model whose matrices are Q2_K (the head Q6_K, as
// llama-quantize keeps it) greedily as the CPU backend does, on both tiers: the prompts of the
// llama.cpp golden of the same model in Q3_K (there is no Q2_K golden; only its prompt tokens
// are used), each prompt batched and 12 decode steps, the same token at every step until the
// CPU's first near-tie. Decode takes Q2_K's fast-tier products (matvec_fast, matvec_dec) on
// the fast tier only.
func TestResidentQ2KModelIsGreedyEqualToCPU(t *testing.T) {
	c := ctxOrSkip(t)
	f, err := gguf.Open(modeltest.TinySynth(t, "", "llama", quant.Q2_K, 7))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	if m.Layers[0].Q.Type != quant.Q2_K || m.Layers[1].Down.Type != quant.Q2_K || m.TokenEmbd.Type != quant.Q2_K {
		t.Fatalf("the model's matrices are %v/%v/%v, want Q2_K", m.TokenEmbd.Type, m.Layers[0].Q.Type, m.Layers[1].Down.Type)
	}
	cases := readGolden(t, "../testdata/synth-llamacpp/llama-Q3_K.jsonl")
	vocab := m.Hyper.VocabSize
	for _, tier := range tiers {
		t.Run(tier.name, func(t *testing.T) {
			withTier(t, c, tier.exact)
			fastKernels := []string{"matvec_fast_q2_k", "matvec_fast2_q2_k", "matvec_dec_q2_k"}
			for _, k := range fastKernels { // forget the pipelines earlier tests made
				if kern, ok := c.kernels[k]; ok {
					kern.destroy(c.dev)
					delete(c.kernels, k)
				}
			}
			r, cr := residentAndCPU(t, c, m, 64)
			defer func() {
				made := 0
				for _, k := range fastKernels {
					if _, ok := c.kernels[k]; ok {
						made++
					}
				}
				if (made > 0) == tier.exact {
					t.Errorf("%s tier: %d of the Q2_K fast-tier kernels %v made", tier.name, made, fastKernels)
				}
			}()
			steps, worst := 0, 0.0
			for _, rc := range cases {
				in, pos := rc.PromptTokens, 0
				for step := 0; step < 12; step++ {
					got, err := r.Eval(in, pos, false)
					if err != nil {
						t.Fatal(err)
					}
					want, err := cr.Eval(in, pos, false)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != vocab || len(want) != vocab {
						t.Fatalf("%d and %d logits, want %d", len(got), len(want), vocab)
					}
					for i := range want {
						d := math.Abs(float64(got[i] - want[i]))
						worst = math.Max(worst, d)
						if d > q2kCPUTolerance {
							t.Fatalf("prompt %q step %d: logit %d is %v, the CPU's %v (tolerance %g)", rc.Prompt, step, i, got[i], want[i], q2kCPUTolerance)
						}
					}
					best, second := topTwo(want)
					g := argmax(got)
					if want[best]-want[second] < q2kCPUNearTie {
						if g != best && g != second {
							t.Fatalf("prompt %q step %d (near tie): token %d, the CPU's leading two %d/%d", rc.Prompt, step, g, best, second)
						}
						break
					}
					if g != best {
						t.Fatalf("prompt %q step %d: token %d, the CPU's %d (top-2 gap %.3f)", rc.Prompt, step, g, best, want[best]-want[second])
					}
					steps++
					pos += len(in)
					in = []int{best}
				}
			}
			t.Logf("%d greedy steps equal; max |gpu − cpu| = %.2g", steps, worst)
			if steps < 16 {
				t.Errorf("only %d steps compared before near-ties", steps)
			}
		})
	}
}
