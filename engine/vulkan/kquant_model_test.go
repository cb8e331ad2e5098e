package vulkan

import (
	"math"
	"testing"

	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// kquantCPUTolerance bounds |gpu − cpu| on every logit of the tiny llama in Q2_K or Q3_K (logits
// of ~8-15) and kquantCPUNearTie is the CPU's top-2 gap under which a step ends the greedy comparison with
// either leading token accepted. Both sides round the activations to the same Q8_K blocks; the
// CPU sums each block's integers (llama.cpp's order), the GPU sums f32 products of the exact
// weights (or, in the fused decode product, integers in another grouping), so an activation
// whose 8-bit rounding flips on a last-bit difference moves later logits by a few tenths:
// measured on lavapipe over all 512 logits, Q3_K exact tier 0.13, fast tier 0.29, Q2_K 0.24 and
// 0.32 (the fast tier's one-pass
// RMSNorm and split attention flip more roundings). A CPU top-2 gap under the near-tie may be
// broken either way by such a flip.
const (
	kquantCPUTolerance = 0.5
	kquantCPUNearTie   = 0.3
)

// bf16CPUTolerance and bf16CPUNearTie are the same bounds for the tiny llama in BF16: no 8-bit
// rounding to flip, only bfloat16 rounding of the activations on both sides and f32 sums in
// another order (measured on lavapipe: 0.048 exact tier, 0.058 fast tier).
const (
	bf16CPUTolerance = 0.2
	bf16CPUNearTie   = 0.12
)

// The resident driver runs a llama model whose matrices are Q2_K or Q3_K (the head Q6_K, as
// llama-quantize keeps it) or BF16 (every matrix) greedily as the CPU backend does, on both tiers: every prompt of the
// llama.cpp golden for the Q3_K model (engine/testdata/synth-llamacpp/llama-Q3_K.jsonl), its
// prompt batched and 12 decode steps, the same token at every step until the CPU's first
// near-tie; the Q3_K model is also held to the golden's own ids and top-5 logits, as the
// i-quant models are (there is no Q2_K golden: that model uses only its prompt tokens). Decode
// takes the type's fast-tier products (matvec_fast, matvec_dec) on the fast tier only.
func TestResidentKQuantModelsAreGreedyEqualToCPU(t *testing.T) {
	c := ctxOrSkip(t)
	cases := readGolden(t, "../testdata/synth-llamacpp/llama-Q3_K.jsonl")
	for _, kq := range []struct {
		typ        quant.Type
		kernel     string // the type's suffix in kernel names
		llamacppEq bool   // the golden is this model's own
	}{
		{quant.Q2_K, "q2_k", false},
		{quant.Q3_K, "q3_k", true},
		{quant.BF16, "bf16", false}, // activations rounded to bfloat16 on both sides, as llama.cpp's CPU does
	} {
		tol, tie := kquantCPUTolerance, kquantCPUNearTie
		if kq.typ == quant.BF16 {
			tol, tie = bf16CPUTolerance, bf16CPUNearTie
		}
		t.Run(kq.typ.String(), func(t *testing.T) { residentKQuantGreedy(t, c, kq.typ, kq.kernel, kq.llamacppEq, tol, tie, cases) })
	}
}

func residentKQuantGreedy(t *testing.T, c *Context, typ quant.Type, kernel string, llamacppEq bool, tol, tie float64, cases []refCase) {
	m := modeltest.Load(t, modeltest.TinySynth(t, "", "llama", typ, 7))
	if m.Layers[0].Q.Type != typ || m.Layers[1].Down.Type != typ || m.TokenEmbd.Type != typ {
		t.Fatalf("the model's matrices are %v/%v/%v, want %v", m.TokenEmbd.Type, m.Layers[0].Q.Type, m.Layers[1].Down.Type, typ)
	}
	vocab := m.Hyper.VocabSize
	for _, tier := range tiers {
		t.Run(tier.name, func(t *testing.T) {
			withTier(t, c, tier.exact)
			fastKernels := []string{"matvec_fast_" + kernel, "matvec_fast2_" + kernel, "matvec_dec_" + kernel}
			forgetKernels(c, fastKernels...)
			r, cr := residentAndCPU(t, c, m, 64)
			defer func() {
				made := 0
				for _, k := range fastKernels {
					if _, ok := c.kernels[k]; ok {
						made++
					}
				}
				if (made > 0) == tier.exact {
					t.Errorf("%s tier: %d of the %v fast-tier kernels %v made", tier.name, made, typ, fastKernels)
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
						if d > tol {
							t.Fatalf("prompt %q step %d: logit %d is %v, the CPU's %v (tolerance %g)", rc.Prompt, step, i, got[i], want[i], tol)
						}
					}
					best, second := topTwo(want)
					g := argmax(got)
					if float64(want[best]-want[second]) < tie {
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
			if !llamacppEq {
				return
			}
			r2, err := NewResident(c, m, ResidentOptions{Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer r2.Close()
			if compared := compareResidentWithGolden(t, r2, cases, iqRefTolerance, iqRefNearTie, goldenReference(t, c, m, typ, 64)); compared < 8 {
				t.Errorf("only %d steps compared with llama.cpp before near-ties", compared)
			}
		})
	}
}
