package vulkan

import (
	"encoding/json"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/model/synth"
)

// engine/testdata/synth-llamacpp/llama-TYPE.jsonl hold llama.cpp's greedy ids and top-5 logits
// (node-llama-cpp 3.22.1, CPU) for `vkllm synth -arch llama -preset tiny -type TYPE -seed 7`
// (engine/synth_llamacpp_test.go holds the CPU backend to them). Here the resident driver on
// both tiers runs the same models of every i-quant type that has one, step by step until the
// first near-tie. Bound: every reference top-5 logit within 0.3. The activations are rounded
// to 8 bits before every product, and the GPU's f32 sums (llama.cpp sums integers per block)
// round some value the other way now and then, which moves later logits: measured on
// lavapipe, most steps within 0.05 and the worst 0.22 (IQ2_S, both tiers; IQ2_XS on the fast
// tier 0.20), where the CPU backend's worst is 0.17. A reference top-2 gap under 0.2 (the CPU
// test's near-tie; no greedy token differed at a larger gap here) ends the comparison with
// either leading token accepted.
const (
	iqRefTolerance = 0.3
	iqRefNearTie   = 0.2
)

func TestResidentIQuantSynthModelsMatchLlamaCpp(t *testing.T) {
	c := ctxOrSkip(t)
	goldens, err := filepath.Glob("../testdata/synth-llamacpp/llama-*.jsonl")
	if err != nil || len(goldens) == 0 {
		t.Skipf("no llama golden files in engine/testdata/synth-llamacpp (%v)", err)
	}
	dir := t.TempDir()
	tested := 0
	for _, golden := range goldens {
		typName := strings.TrimPrefix(strings.TrimSuffix(filepath.Base(golden), ".jsonl"), "llama-")
		typ, err := synth.ParseType(typName)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := iquantSuffix[typ]; !ok {
			continue // the other types have their own reference tests
		}
		tested++
		m := modeltest.Load(t, modeltest.TinySynth(t, dir, "llama", typ, 7))
		cases := readGolden(t, golden)
		for _, tier := range tiers {
			t.Run(typName+"/"+tier.name, func(t *testing.T) {
				withTier(t, c, tier.exact)
				r, err := NewResident(c, m, ResidentOptions{Context: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				compared := compareResidentWithGolden(t, r, cases, iqRefTolerance, iqRefNearTie, goldenReference(t, c, m, typ, 64))
				if compared < 8 {
					t.Errorf("only %d steps compared before near-ties", compared)
				}
			})
		}
	}
	if tested == 0 {
		t.Skip("no golden file of an i-quant type")
	}
}

// routerTie is the CPU reference's router margin (cpu.Runner.RouterMargin: the gap in router
// logits between the last expert selected and the best one left out) under which a step of a
// mixture-of-experts model ends the comparison: the resident driver's router logits sit up to
// ~0.005 from the CPU's on the fast tier (measured on lavapipe, tiny qwen3moe Q4_K), so a gap
// below 0.02 may route a token to another expert, which moves that step's logits by whole units
// (a gap of 0.001 there moved them by 3.2).
const routerTie = 0.02

// compareResidentWithGolden runs every case greedily on r and compares it step by step with
// llama.cpp's ids until the first near-tie (a reference top-2 gap under tie, where either
// leading token is accepted, or any of the top 5 within tie of the best), and its top-5 logits
// within tol at every compared step, as engine's compareWithReference does for the CPU
// backend; it returns the steps compared (-1 where every case was left out, below). ref
// (nil where neither is needed) runs the CPU backend on the same tokens in lockstep: with a
// mixture of experts, a step whose token it routes near a tie (RouterMargin under routerTie)
// ends the case unchecked (where r captures its routing, CaptureRouting, the device's own
// choice of experts decides instead: a case is compared while it equals the CPU's, near a tie
// or not, and ends where it differs); with its unrounded run (a device whose prompt windows do not round
// activations as llama.cpp's CPU does: see cpuReference), each step's bound grows by the
// rounding's measured effect on the top-5 logits, a near-tie of the unrounded logits is a
// near-tie, and a case whose prompt holds a token the CPU routes near a tie is left out.
func compareResidentWithGolden(t *testing.T, r *Resident, cases []refCase, tol, tie float64, ref *cpuReference) int {
	t.Helper()
	compared, skipped := 0, 0
	deviceRouting := ref != nil && ref.moe && r.routing != nil // the runner captures its routing
	for _, rc := range cases {
		if ref != nil {
			ref.rounded.Reset()
			if ref.unrounded != nil {
				ref.unrounded.Reset()
			}
		}
		// lockstep evaluates tokens at pos on ref too: whether the routing is near a tie, and
		// the rounded and unrounded logits.
		lockstep := func(tokens []int, pos int) (bool, []float32, []float32) {
			if ref == nil {
				return false, nil, nil
			}
			rounded, unrounded := ref.eval(t, tokens, pos, false)
			return ref.routedNearTie(), rounded, unrounded
		}
		logits, err := r.Eval(rc.PromptTokens, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		pos := len(rc.PromptTokens)
		worst, worstUnrounded := 0.0, 0.0 // against llama.cpp; against the unrounded run
		nearTie, rounded, unrounded := lockstep(rc.PromptTokens, 0)
		if deviceRouting {
			// the device's own choice of experts, against the CPU's: a case is compared as
			// long as they are alike, however near a tie the routing was
			if apart := ref.routingApart(t, r, len(rc.PromptTokens)); apart != "" {
				t.Logf("prompt %q: routed otherwise on the device (%s); the case is not compared", rc.Prompt, apart)
				skipped++
				continue
			}
			nearTie = false
		} else if ref != nil && ref.unrounded != nil && ref.moe {
			// where the device's prompt rows do not round as the reference (unrounded), a
			// prompt token the CPU routes near a tie may go to other experts there: nothing
			// of the case is comparable
			if clear := promptRouting(t, ref.model, rc.PromptTokens); clear < len(rc.PromptTokens) {
				t.Logf("prompt %q: its token %d is routed within %g of a tie on the CPU; the case is not compared on this device", rc.Prompt, clear, routerTie)
				skipped++
				continue
			}
		}
		for step, want := range rc.Generated {
			if nearTie {
				t.Logf("prompt %q step %d: the CPU's routing is within %g of a tie; the comparison ends here", rc.Prompt, step, routerTie)
				break
			}
			top := rc.Top5[step]
			ids := make([]int, len(top))
			for i, p := range top {
				ids[i] = int(p[0])
			}
			bound := tol + roundingEffect(rounded, unrounded, ids)
			worstUnrounded = math.Max(worstUnrounded, roundingEffect(logits, unrounded, ids)) // |device − unrounded| over ids
			for _, p := range top {
				d := math.Abs(float64(logits[int(p[0])]) - p[1])
				worst = math.Max(worst, d)
				if d > bound {
					t.Errorf("prompt %q step %d: logit of token %d is %.5f, llama.cpp %.5f (bound %.3g)", rc.Prompt, step, int(p[0]), logits[int(p[0])], p[1], bound)
				}
			}
			got := argmax(logits)
			if nearTieEither(top[0][1]-top[1][1], unrounded, ids[0], ids[1], tie) {
				// either leading token, or any of the top 5 as near the best as a tie
				tied := got == ids[0] || got == ids[1]
				for _, p := range top {
					tied = tied || (int(p[0]) == got && top[0][1]-p[1] < tie)
				}
				if !tied {
					t.Fatalf("prompt %q step %d (near tie): token %d, llama.cpp's leading two %d/%d and its top 5 %v", rc.Prompt, step, got, ids[0], ids[1], top)
				}
				break
			}
			if got != want {
				t.Fatalf("prompt %q step %d: token %d, llama.cpp %d (its top-2 gap %.3f)", rc.Prompt, step, got, want, top[0][1]-top[1][1])
			}
			compared++
			if logits, err = r.Eval([]int{want}, pos, false); err != nil {
				t.Fatal(err)
			}
			nearTie, rounded, unrounded = lockstep([]int{want}, pos)
			pos++
			if deviceRouting {
				if apart := ref.routingApart(t, r, 1); apart != "" {
					t.Logf("prompt %q step %d: token %d routed otherwise on the device (%s); the comparison ends here", rc.Prompt, step+1, want, apart)
					break
				}
				nearTie = false
			}
		}
		if unrounded != nil {
			t.Logf("prompt %q: largest top-5 logit deviation %.2g (from the unrounded run %.2g)", rc.Prompt, worst, worstUnrounded)
		} else {
			t.Logf("prompt %q: largest top-5 logit deviation %.2g", rc.Prompt, worst)
		}
	}
	if skipped == len(cases) {
		t.Logf("every case's prompt is routed near a tie on the CPU or otherwise on the device: none compared on this device (its prompt rows round otherwise)")
		return -1
	}
	return compared
}

// readGolden reads a reference file of refCase lines.
func readGolden(t *testing.T, path string) []refCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []refCase
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c refCase
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		out = append(out, c)
	}
	return out
}
