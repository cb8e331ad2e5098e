package vulkan

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
// A prompt's last token runs alone (the state is snapshotted before it): the short prompt is one
// prefill window of 2 rows and a one-row decode pass, the long one three windows of 4 rows (the
// state carried across them) and the one-row pass.
// Where the device's fast-tier prompt windows take fp16 tiles (the H200), they do not round
// activations to 8 bits as the CPU does: each row's bound grows by the CPU's own measured
// rounding effect on that row (cpuReference), and the fast tier runs once more on the
// shared-memory GEMM tier (fast-shared-gemm: activations rounded as the CPU rounds them, f32
// attention, lavapipe's arithmetic) under the plain bounds, which tells that rounding from a
// defect.
func TestResidentQwen35HybridsAgreeWithCPU(t *testing.T) {
	c := ctxOrSkip(t)
	// Two prompts an architecture: one prefill window of 2 rows and a one-row pass, and three
	// windows of 4 rows and the one-row pass. The qwen35moe prompts' tokens are routed clear of a
	// tie by its tiny models (CPU router margins 0.07-0.98 on F32 and Q8_0): its first prompts
	// were qwen35's, whose token 1 the Q8_0 model routes 0.006 from a tie, and the H200's fp16
	// prompt rows chose the other expert there (a logit 2.34 against the CPU's 4.03, session
	// 14). promptRouting still ends a comparison at a near-tied token.
	type prompt struct {
		name   string
		tokens []int
	}
	prompts := map[string][]prompt{
		"qwen35": {
			{"short", []int{1, 262, 300}},
			{"windows", []int{1, 262, 300, 275, 307, 260, 310, 99, 12, 44, 27, 100, 5}},
		},
		"qwen35moe": {
			{"short", []int{307, 321, 328}},
			{"windows", []int{307, 321, 328, 335, 349, 356, 377, 384, 405, 419, 433, 440, 447}},
		},
	}
	// On a device with cooperative matrices the fast tier's prompt windows take fp16 tiles (and
	// NVIDIA's cm2 kernels); there it runs once more on the shared-memory GEMM tier with f32
	// attention, as lavapipe computes, which tells fp16 rounding from a defect. Elsewhere the
	// fast tier runs once more against the unrounded reference that such a device takes
	// (fast-unrounded-reference), so that its plumbing is tested where CI runs: it must measure a
	// rounding effect on Q8_0 and none on F32.
	type variant struct {
		name                   string
		exact, sharedGEMM, unr bool
	}
	variants := []variant{{"exact", true, false, false}, {"fast", false, false, false}}
	if c.gemm == gemmCoopmat {
		variants = append(variants, variant{"fast-shared-gemm", false, true, false})
	} else {
		variants = append(variants, variant{"fast-unrounded-reference", false, false, true})
	}
	dir := t.TempDir()
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		for _, b := range hybridBounds {
			m := loadTiny(t, dir, arch, b.typ, 5)
			for _, tier := range variants {
				t.Run(fmt.Sprintf("%s-%v/%s", arch, b.typ, tier.name), func(t *testing.T) {
					withTier(t, c, tier.exact)
					if tier.sharedGEMM {
						defer func(g gemmTier, fp16, cm2 bool) { c.gemm, c.attFP16, c.attCM2 = g, fp16, cm2 }(c.gemm, c.attFP16, c.attCM2)
						c.gemm, c.attFP16, c.attCM2 = gemmShared, false, false
					}
					r, err := NewResident(c, m, ResidentOptions{Context: 64, Window: 4})
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					roundsLike := roundsLikeReference(c, b.typ, m.Hyper.Dim) && !tier.unr
					if !roundsLike {
						t.Logf("against the unrounded reference: each row's bound grows by the CPU's measured 8-bit rounding effect")
					}
					total, effect := 0, 0.0
					for _, p := range prompts[arch] {
						ref := newCPUReference(t, m, roundsLike, 64)
						worst, steps, eff := compareHybridWithCPU(t, r, ref, m, p.tokens, 6, b.tol, b.tie)
						t.Logf("%s prompt: largest |gpu − cpu| logit %.2g, %d greedy steps compared, rounding effect up to %.2g", p.name, worst, steps, eff)
						total += steps
						effect = math.Max(effect, eff)
					}
					if total < 4 {
						t.Errorf("only %d greedy steps compared before near-ties: the test no longer tests much", total)
					}
					if tier.unr && (b.typ == quant.F32) != (effect == 0) {
						t.Errorf("the unrounded reference measured a rounding effect of %g on %v weights (want one on quantized weights only)", effect, b.typ)
					}
				})
			}
		}
	}
}

// compareHybridWithCPU evaluates prompt at position 0 on the resident driver and the CPU
// reference (every logit of the rows up to the first token the CPU routes near a tie
// compared), then up to steps greedy tokens; it returns the largest logit difference and the
// steps whose token was compared, and the largest rounding effect measured. Each row is held to tol, plus the row's measured rounding
// effect where ref has an unrounded run (see cpuReference).
func compareHybridWithCPU(t *testing.T, r *Resident, ref *cpuReference, m *model.Model, prompt []int, steps int, tol, tie float64) (worst float64, compared int, effect float64) {
	t.Helper()
	vocab := m.Hyper.VocabSize
	cmp := func(what string, got, want, unrounded []float32, rows int) {
		t.Helper()
		for row := 0; row < rows; row++ {
			lo, hi := row*vocab, (row+1)*vocab
			bound := tol
			if unrounded != nil {
				e := roundingEffect(want[lo:hi], unrounded[lo:hi], nil)
				bound += e
				effect = math.Max(effect, e)
			}
			for i := lo; i < hi; i++ {
				d := math.Abs(float64(got[i] - want[i]))
				worst = math.Max(worst, d)
				if !(d <= bound) {
					t.Fatalf("%s: row %d logit %d: gpu %v, cpu %v (bound %.3g)", what, row, i-lo, got[i], want[i], bound)
				}
			}
		}
	}
	got, err := r.Eval(prompt, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	want, unrounded := ref.eval(t, prompt, 0, true)
	clear := promptRouting(t, m, prompt)
	cmp("prompt", got, want, unrounded, clear)
	if clear < len(prompt) {
		t.Logf("prompt token %d is routed within %g of a tie on the CPU: rows from it on not compared", clear, routerTie)
		return worst, 0, effect
	}
	rowOf := func(v []float32) []float32 {
		if v == nil {
			return nil
		}
		return v[len(v)-vocab:]
	}
	last, wantLast, unroundedLast := rowOf(got), rowOf(want), rowOf(unrounded)
	pos := len(prompt)
	for step := 0; step < steps; step++ {
		if ref.routedNearTie() {
			break
		}
		tok := argmax(wantLast)
		second := secondOf(wantLast, tok)
		if nearTieEither(float64(wantLast[tok]-wantLast[second]), unroundedLast, tok, second, tie) {
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
		wantLast, unroundedLast = ref.eval(t, []int{tok}, pos, false)
		cmp(fmt.Sprintf("decode step %d", step), last, wantLast, unroundedLast, 1)
		pos++
	}
	return worst, compared, effect
}

// secondOf is the index of the largest value of v other than v[first].
func secondOf(v []float32, first int) int {
	best := -1
	for i, x := range v {
		if i != first && (best < 0 || x > v[best]) {
			best = i
		}
	}
	return best
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

// Prefix reuse with a recurrent state. A multi-token evaluation leaves two snapshots of the
// state on the device (before its last token and after it); an evaluation of C at a position p
// before the state's end restores the newest snapshot at or before p whose tokens are still the
// remembered ones, evaluates the remembered tokens from there to p again (from 0 with none), then
// C. Each case evaluates its steps, then C at p, and must give what a fresh runner gives for the
// tokens before p followed by C, within 1e-4 (the two runs cut their windows differently;
// measured 0 on both tiers on lavapipe, whose windows of one row and of several round alike),
// having evaluated again exactly the tokens between the snapshot and p. On a device whose
// fast-tier windows of several rows take fp16 cooperative-matrix tiles (usesCoopmat) and
// windows of one the int8 products, the two cuts round differently and these random-weight
// logits move by up to ~0.2 (H200, session 14): there the bound is the goldens'
// iqRefTolerance. Negative control in every case: carrying the state of every step into C at p
// instead (no rewind) moves the logits by far more than the bound (4-11 measured). The device
// argmax after a rewind (Greedy) is the cold run's argmax too.
func TestResidentQwen35RewindEqualsColdRun(t *testing.T) {
	c := ctxOrSkip(t)
	a := []int{1, 262, 300, 275, 307, 260, 310} // its evaluation leaves snapshots at 6 and 7
	b := []int{99, 12, 44}
	cc := []int{27, 100, 5, 88}
	const x, y = 51, 77 // x differs from a[6]
	type eval struct {
		tokens []int
		pos    int
	}
	cat := func(parts ...[]int) []int { return slices.Concat(parts...) }
	cases := []struct {
		name     string
		steps    []eval
		pos      int
		before   []int // the tokens before pos, C's prefix in the cold run
		replayed int   // tokens the rewind evaluates again
	}{
		// A+B leaves snapshots at 9 and 10
		{"before every snapshot: from position 0", []eval{{a, 0}, {b, 7}}, 3, a[:3], 3},
		{"at the snapshot before the last token: a regenerate", []eval{{a, 0}}, 6, a[:6], 0},
		{"after the snapshot after the last token: decode steps since", []eval{{a, 0}, {b[:1], 7}, {b[1:2], 8}, {b[2:], 9}}, 9, cat(a, b[:2]), 2},
		// x at 6 restores the snapshot at 6 and makes the one at 7 (after a[6]) another history's
		{"a snapshot whose tokens changed is passed over", []eval{{a, 0}, {[]int{x}, 6}, {[]int{y}, 7}}, 7, cat(a[:6], []int{x}), 1},
	}
	dir := t.TempDir()
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		m := loadTiny(t, dir, arch, quant.Q8_0, 5)
		for _, tier := range tiers {
			t.Run(arch+"/"+tier.name, func(t *testing.T) {
				withTier(t, c, tier.exact)
				bound := 1e-4
				if !tier.exact && c.usesCoopmat(quant.Q8_0, m.Hyper.Dim, 2) {
					bound = iqRefTolerance // a window of several rows rounds otherwise than one of one row
				}
				vocab := m.Hyper.VocabSize
				run := func(steps []eval, last func(r *Resident) ([]float32, error)) []float32 {
					t.Helper()
					r, err := NewResident(c, m, ResidentOptions{Context: 64, Window: 4})
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					for _, e := range steps {
						if _, err := r.Eval(e.tokens, e.pos, false); err != nil {
							t.Fatalf("eval %v at %d: %v", e.tokens, e.pos, err)
						}
					}
					out, err := last(r)
					if err != nil {
						t.Fatal(err)
					}
					return out
				}
				diff := func(got, want []float32) float64 {
					d := 0.0
					for i := 0; i < vocab; i++ {
						d = math.Max(d, math.Abs(float64(got[i]-want[i])))
					}
					return d
				}
				for _, tc := range cases {
					cold := run(nil, func(r *Resident) ([]float32, error) { return r.Eval(cat(tc.before, cc), 0, false) })
					replayed := -1
					rewound := run(tc.steps, func(r *Resident) ([]float32, error) {
						r.replayed = -1
						out, err := r.Eval(cc, tc.pos, false)
						replayed = r.replayed
						return out, err
					})
					carried := run(tc.steps, func(r *Resident) ([]float32, error) {
						r.history = r.history[:tc.pos] // as if the state held only the tokens before pos: no rewind
						return r.Eval(cc, tc.pos, false)
					})
					worst, moved := diff(rewound, cold), diff(carried, cold)
					t.Logf("%s: %d tokens evaluated again; rewound vs cold: largest difference %.2g; carried state vs cold %.2g", tc.name, replayed, worst, moved)
					if worst > bound {
						t.Errorf("%s: evaluating at position %d: logits differ from a cold run by %.3g (tolerance %g)", tc.name, tc.pos, worst, bound)
					}
					if replayed != tc.replayed {
						t.Errorf("%s: the rewind to position %d evaluated %d tokens again, want %d", tc.name, tc.pos, replayed, tc.replayed)
					}
					if moved < max(1e-2, 3*bound) {
						t.Errorf("%s: negative control: the carried state moves the logits by only %.3g, so the test cannot tell a rewind from none", tc.name, moved)
					}
				}
				// Greedy after a rewind: its argmax is the cold run's
				const p = 3
				cold := run(nil, func(r *Resident) ([]float32, error) { return r.Eval(cat(a[:p], cc), 0, false) })
				best := 0
				run([]eval{{a, 0}, {b, len(a)}, {cc[:len(cc)-1], p}}, func(r *Resident) ([]float32, error) {
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
// (up to 566 tokens: past a 64-token chunk of the recurrence and past one 512-row prefill window,
// the state carried across windows) with llama.cpp's greedy ids up to the first near-tie, on the
// fast tier for every golden type
// and on the exact tier for Q8_0; bounds as the other goldens' (iqRefTolerance, iqRefNearTie,
// and for the experts the CPU's routing margin, routerTie). Every case's prompt starts at
// position 0 after the previous case's tokens, so each one also rewinds the recurrent state;
// where the prompt windows take fp16 tiles, checkRewindShare holds that rewind to a fresh
// runner's logits, so a case's deviation there is the arithmetic's.
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
		m := loadTiny(t, dir, arch, typ, 7)
		cases := readGolden(t, golden)
		for _, tier := range tiers {
			if tier.exact && typ != quant.Q8_0 {
				continue
			}
			t.Run(fmt.Sprintf("%s-%s/%s", arch, typName, tier.name), func(t *testing.T) {
				withTier(t, c, tier.exact)
				r, err := NewResident(c, m, ResidentOptions{Context: 1024, CaptureRouting: true})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				ref := goldenReference(t, c, m, typ, 1024)
				compared := compareResidentWithGolden(t, r, cases, iqRefTolerance, iqRefNearTie, ref)
				t.Logf("%d steps compared", compared)
				if compared >= 0 && compared < 8 {
					t.Errorf("only %d steps compared before near-ties: the golden file no longer tests much", compared)
				}
				if ref != nil && ref.unrounded != nil {
					checkRewindShare(t, c, m, cases)
				}
			})
		}
	}
}

// checkRewindShare holds, on a device whose prompt windows do not round (fp16 tiles: there
// the goldens' bound stands on the unrounded run, and a case's deviation may be the rewind's as
// well as the arithmetic's), each case's prompt logits after the cases before it (the
// recurrent state rewound to the prompt's start, as the golden comparison runs them) to a
// fresh runner's on the prompt alone: both evaluate the prompt's rows in one window with the
// same kernels, so they agree within 1e-3 (lavapipe, made to run it: 0 for every case).
func checkRewindShare(t *testing.T, c *Context, m *model.Model, cases []refCase) {
	t.Helper()
	open := func() *Resident {
		r, err := NewResident(c, m, ResidentOptions{Context: 1024})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	shared := open()
	defer shared.Close()
	for _, rc := range cases {
		after, err := shared.Eval(rc.PromptTokens, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		fresh := open()
		alone, err := fresh.Eval(rc.PromptTokens, 0, false)
		fresh.Close()
		if err != nil {
			t.Fatal(err)
		}
		d := maxDiff(after, alone)
		t.Logf("prompt %q: after the earlier cases vs alone: largest logit difference %.2g", rc.Prompt, d)
		if d > 1e-3 {
			t.Errorf("prompt %q: its logits after the earlier cases differ from a fresh runner's by %.3g: the rewind to its start does not restore the state", rc.Prompt, d)
		}
	}
}
