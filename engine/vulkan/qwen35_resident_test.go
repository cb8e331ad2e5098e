package vulkan

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/cpu"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/synth"
	"github.com/vkllm/vkllm/engine/quant"
)

// The Gated-DeltaNet hybrids resident on the device: qwen35 (dense FFN) and qwen35moe (experts
// and a shared expert). Their tiny synth models have three DeltaNet layers (4 value heads of 64
// over 2 key heads, a 4-tap convolution) and one gated attention layer (M-RoPE over 16 of 64
// dimensions).

// hybridBounds are the logit bounds of the CPU comparison by weight type: tol for every logit,
// tie the CPU's top-2 gap under which a greedy step ends the comparison (either leading token
// then accepted). F32 weights round nothing to 8 bits, so the resident forward and the CPU
// differ by f32 summation order alone: measured 1e-5 on lavapipe on both tiers (as the other
// architectures' F32 models, bounded 0.01 in TestResidentMoEAgreesWithCPU). On Q8_0 the exact
// tier's products are the CPU's bit for bit, but the hybrids' beta and alpha projections are
// F32 matrices (as the converters write them) whose prefill product sums in another order than
// the CPU's AVX2 dot: a last-bit difference in a gate moves an 8-bit rounding of a later
// activation, measured up to 0.2 on a logit after the four layers (0.08 after one), so the
// Q8_0 bounds are the golden tests' (iqRefTolerance, iqRefNearTie).
var hybridBounds = []struct {
	typ      quant.Type
	tol, tie float64
}{{quant.F32, 1e-2, 2e-2}, {quant.Q8_0, iqRefTolerance, iqRefNearTie}}

// The resident hybrids agree with the CPU reference on both tiers: every logit of a prompt's
// prefill within the type's bound (hybridBounds), then greedy decode steps (each step's logits
// within it too, the same token up to the first near-tie of the CPU's logits or, with experts, of its routing).
// The short prompt fits one prefill window; the long one spans three windows of 4 rows (the
// state carried across them) and a one-row decode pass at the end of the prompt.
func TestResidentQwen35HybridsAgreeWithCPU(t *testing.T) {
	c := ctxOrSkip(t)
	prompts := []struct {
		name   string
		tokens []int
	}{
		{"short", []int{1, 262, 300}},
		{"windows", []int{1, 262, 300, 275, 307, 260, 310, 99, 12, 44, 27, 100, 5}},
	}
	dir := t.TempDir()
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		for _, b := range hybridBounds {
			m := loadTinyMoE(t, dir, arch, b.typ, 5)
			for _, tier := range tiers {
				t.Run(fmt.Sprintf("%s-%v/%s", arch, b.typ, tier.name), func(t *testing.T) {
					withTier(t, c, tier.exact)
					r, err := NewResident(c, m, ResidentOptions{Context: 64, Window: 4})
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					cr, err := cpu.New(m, cpu.Options{Threads: 1, Context: 64})
					if err != nil {
						t.Fatal(err)
					}
					defer cr.Close()
					total := 0
					for _, p := range prompts {
						worst, steps := compareHybridWithCPU(t, r, cr, m, p.tokens, 6, b.tol, b.tie)
						t.Logf("%s prompt: largest |gpu − cpu| logit %.2g, %d greedy steps compared", p.name, worst, steps)
						total += steps
					}
					if total < 4 {
						t.Errorf("only %d greedy steps compared before near-ties: the test no longer tests much", total)
					}
				})
			}
		}
	}
}

// compareHybridWithCPU evaluates prompt at position 0 on both runners (every logit compared),
// then up to steps greedy tokens; it returns the largest logit difference and the steps whose
// token was compared.
func compareHybridWithCPU(t *testing.T, r *Resident, cr *cpu.Runner, m *model.Model, prompt []int, steps int, tol, tie float64) (float64, int) {
	t.Helper()
	vocab := m.Hyper.VocabSize
	moe := m.Hyper.MoE.Experts > 0
	worst := 0.0
	cmp := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			d := math.Abs(float64(got[i] - want[i]))
			worst = math.Max(worst, d)
			if !(d <= tol) {
				t.Fatalf("%s: row %d logit %d: gpu %v, cpu %v (tolerance %g)", what, i/vocab, i%vocab, got[i], want[i], tol)
			}
		}
	}
	got, err := r.Eval(prompt, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cr.Eval(prompt, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	cmp("prompt", got, want)
	last, wantLast := got[len(got)-vocab:], want[len(want)-vocab:]
	pos, compared := len(prompt), 0
	for step := 0; step < steps; step++ {
		if moe && cr.RouterMargin() < routerTie {
			break
		}
		tok := argmax(wantLast)
		if gap := topGap(wantLast); float64(gap) < tie {
			if g := argmax(last); g != tok && float64(last[g]-last[tok]) > tie {
				t.Fatalf("step %d (near tie): gpu token %d, cpu %d", step, g, tok)
			}
			break
		}
		if g := argmax(last); g != tok {
			t.Fatalf("step %d: gpu token %d, cpu %d (cpu top-2 gap %.3f)", step, g, tok, topGap(wantLast))
		}
		compared++
		if last, err = r.Eval([]int{tok}, pos, false); err != nil {
			t.Fatal(err)
		}
		if wantLast, err = cr.Eval([]int{tok}, pos, false); err != nil {
			t.Fatal(err)
		}
		cmp(fmt.Sprintf("decode step %d", step), last, wantLast)
		pos++
	}
	return worst, compared
}

// topGap is the gap between the largest and the second largest value.
func topGap(v []float32) float32 {
	a, b := float32(math.Inf(-1)), float32(math.Inf(-1))
	for _, x := range v {
		if x > a {
			a, b = x, a
		} else if x > b {
			b = x
		}
	}
	return a - b
}

// Prefix reuse with a recurrent state: after A and then B (a continuation at len(A)), an
// evaluation of C at a position p inside A rewinds (the state cleared, A[:p] evaluated again)
// and gives what a fresh runner gives for A[:p]+C, within 1e-4 (the two runs cut their windows
// differently, and the fast tier's products round a window of one row differently; measured
// 0 on both tiers on lavapipe). The device argmax after a rewind (Greedy) is that run's argmax
// too. Negative control: carrying the state of A+B into C at p instead moves the logits by far
// more.
func TestResidentQwen35RewindEqualsColdRun(t *testing.T) {
	c := ctxOrSkip(t)
	a := []int{1, 262, 300, 275, 307, 260, 310}
	b := []int{99, 12, 44}
	cc := []int{27, 100, 5, 88}
	const p = 3
	dir := t.TempDir()
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		m := loadTinyMoE(t, dir, arch, quant.Q8_0, 5)
		for _, tier := range tiers {
			t.Run(arch+"/"+tier.name, func(t *testing.T) {
				withTier(t, c, tier.exact)
				vocab := m.Hyper.VocabSize
				run := func(evals ...func(r *Resident) ([]float32, error)) []float32 {
					t.Helper()
					r, err := NewResident(c, m, ResidentOptions{Context: 64, Window: 4})
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					var out []float32
					for _, e := range evals {
						if out, err = e(r); err != nil {
							t.Fatal(err)
						}
					}
					return out
				}
				eval := func(tokens []int, pos int) func(r *Resident) ([]float32, error) {
					return func(r *Resident) ([]float32, error) { return r.Eval(tokens, pos, false) }
				}
				cold := run(eval(append(append([]int(nil), a[:p]...), cc...), 0))
				rewound := run(eval(a, 0), eval(b, len(a)), eval(cc, p))
				carried := run(eval(a, 0), eval(b, len(a)), func(r *Resident) ([]float32, error) {
					r.history = r.history[:p] // as if the state held only A[:p]: no rewind
					return r.Eval(cc, p, false)
				})
				worst, moved := 0.0, 0.0
				for i := 0; i < vocab; i++ {
					worst = math.Max(worst, math.Abs(float64(rewound[i]-cold[i])))
					moved = math.Max(moved, math.Abs(float64(carried[i]-cold[i])))
				}
				t.Logf("rewound vs cold: largest difference %.2g; carried state vs cold %.2g", worst, moved)
				if worst > 1e-4 {
					t.Errorf("evaluating at position %d after %d tokens: logits differ from a cold run by %.3g (tolerance 1e-4)", p, len(a)+len(b), worst)
				}
				if moved < 0.1 {
					t.Errorf("negative control: the carried state moves the logits by only %.3g, so the test cannot tell a rewind from none", moved)
				}
				// Greedy at an earlier position rewinds too: its argmax is the cold run's
				best := 0
				run(eval(a, 0), eval(b, len(a)), eval(cc[:len(cc)-1], p), func(r *Resident) ([]float32, error) {
					var err error
					best, err = r.Greedy(cc[len(cc)-1], p+len(cc)-1)
					return nil, err
				})
				if want := argmax(cold); best != want && topGap(cold) > 1e-3 {
					t.Errorf("Greedy after a rewind: token %d, the cold run's argmax %d", best, want)
				}
			})
		}
	}
}

// The tiny qwen35 and qwen35moe models of engine/testdata/synth-llamacpp continue every prompt
// with llama.cpp's greedy ids up to the first near-tie, on the fast tier for every golden type
// and on the exact tier for Q8_0; bounds as the other goldens' (iqRefTolerance, iqRefNearTie,
// and for the experts the CPU's routing margin, routerTie). Every case's prompt starts at
// position 0 after the previous case's tokens, so each one also rewinds the recurrent state.
func TestResidentQwen35SynthModelsMatchLlamaCpp(t *testing.T) {
	c := ctxOrSkip(t)
	var goldens []string
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		g, err := filepath.Glob("../testdata/synth-llamacpp/" + arch + "-*.jsonl")
		if err != nil || len(g) == 0 {
			t.Fatalf("no %s golden files in engine/testdata/synth-llamacpp (%v)", arch, err)
		}
		goldens = append(goldens, g...)
	}
	dir := t.TempDir()
	for _, golden := range goldens {
		arch, typName, _ := strings.Cut(strings.TrimSuffix(filepath.Base(golden), ".jsonl"), "-")
		typ, err := synth.ParseType(typName)
		if err != nil {
			t.Fatal(err)
		}
		m := loadTinyMoE(t, dir, arch, typ, 7)
		cases := readGolden(t, golden)
		for _, tier := range tiers {
			if tier.exact && typ != quant.Q8_0 {
				continue
			}
			t.Run(fmt.Sprintf("%s-%s/%s", arch, typName, tier.name), func(t *testing.T) {
				withTier(t, c, tier.exact)
				r, err := NewResident(c, m, ResidentOptions{Context: 256})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				var route *cpu.Runner
				if m.Hyper.MoE.Experts > 0 {
					if route, err = cpu.New(m, cpu.Options{Threads: 1, Context: 256}); err != nil {
						t.Fatal(err)
					}
					defer route.Close()
				}
				compared := compareResidentWithGolden(t, r, cases, iqRefTolerance, iqRefNearTie, route)
				t.Logf("%d steps compared", compared)
				if compared < 8 {
					t.Errorf("only %d steps compared before near-ties: the golden file no longer tests much", compared)
				}
			})
		}
	}
}
