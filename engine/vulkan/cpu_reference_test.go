package vulkan

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/cpu"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// cpuReference is the CPU backend run beside the resident driver on the same tokens, for the
// comparisons with the CPU and with llama.cpp's goldens:
//   - rounded runs the model itself, rounding activations to 8 bits before each quantized
//     product as llama.cpp's CPU does (the goldens' arithmetic); with a mixture of experts its
//     RouterMargin says when a token is routed near a tie;
//   - unrounded (or nil) runs the model's dequantized copy: the same weights, f32 activations.
//
// unrounded serves devices whose fast-tier prompt windows multiply fp16 activations on
// cooperative-matrix tiles (roundsLikeReference false: the H200): such a device approaches the
// unrounded logits, not the rounded ones, and on these random-weight models the rounding alone
// moves logits by 0.1-0.3 (tiny llama, qwen3moe and qwen35 at Q8_0, measured on this CPU
// backend). There each compared row's bound grows by that row's measured rounding effect (the
// triangle inequality: device to unrounded within the fp16 error, unrounded to reference
// within the effect), and a step whose top-2 gap is a near-tie in either run is a near-tie.
// Elsewhere (lavapipe: int8 products in prompt windows too) the bounds stay as stated.
type cpuReference struct {
	rounded, unrounded *cpu.Runner
	moe                bool
	model              *model.Model
}

// newCPUReference starts the CPU runners for m (unrounded on a second load of m's file,
// dequantized, when roundsLike is false).
func newCPUReference(t *testing.T, m *model.Model, roundsLike bool, ctx int) *cpuReference {
	t.Helper()
	ref := &cpuReference{moe: m.Hyper.MoE.Experts > 0, model: m}
	var err error
	if ref.rounded, err = cpu.New(m, cpu.Options{Threads: 1, Context: ctx}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.rounded.Close() })
	if roundsLike {
		return ref
	}
	dq := modeltest.Load(t, m.File.Path)
	modeltest.Dequantize(t, dq)
	if ref.unrounded, err = cpu.New(dq, cpu.Options{Threads: 1, Context: ctx}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.unrounded.Close() })
	return ref
}

// roundsLikeReference reports whether the device's current tier computes the prompt windows
// of a model whose products take weights of type typ (rows of dim) with activations rounded as
// the CPU reference rounds them, as its one-token steps do: not where those windows take fp16
// cooperative-matrix tiles.
func roundsLikeReference(c *Context, typ quant.Type, dim int) bool {
	return !c.usesCoopmat(typ, dim, 2)
}

// eval evaluates tokens at pos on both runners and returns their logits (every row's with
// all); unrounded is nil without that runner.
func (ref *cpuReference) eval(t *testing.T, tokens []int, pos int, all bool) (rounded, unrounded []float32) {
	t.Helper()
	rounded, err := ref.rounded.Eval(tokens, pos, all)
	if err != nil {
		t.Fatal(err)
	}
	if ref.unrounded != nil {
		if unrounded, err = ref.unrounded.Eval(tokens, pos, all); err != nil {
			t.Fatal(err)
		}
	}
	return rounded, unrounded
}

// routedNearTie reports whether the last evaluation routed its last token within routerTie of
// another choice of experts (never for a dense model).
func (ref *cpuReference) routedNearTie() bool {
	return ref.moe && ref.rounded.RouterMargin() < routerTie
}

// routingApart compares the experts the device chose for the last n rows of an evaluation (as
// many as its last pass holds: r.Routing, the runner opened with CaptureRouting) with those the
// rounded CPU run chose for the same tokens, as sets per token and layer. It returns "" where they are
// alike, else where they first differ: from there on the device computes another function of
// the tokens, and nothing after it is comparable.
func (ref *cpuReference) routingApart(t *testing.T, r *Resident, n int) string {
	t.Helper()
	cpuRouting := ref.rounded.Routing()
	used := ref.model.Hyper.MoE.Used
	dev, err := r.Routing(0) // the device's last pass: the evaluation's last rows
	if err != nil {
		t.Fatal(err)
	}
	if len(dev) > 0 && len(cpuRouting) > 0 {
		n = min(n, len(dev[0])/used, len(cpuRouting[0])/used)
	}
	if len(dev) != len(cpuRouting) {
		t.Fatalf("routing of %d layers on the device, %d on the CPU", len(dev), len(cpuRouting))
	}
	for l := range dev {
		dev[l] = dev[l][len(dev[l])-n*used:]
		cpuRows := cpuRouting[l][len(cpuRouting[l])-n*used:]
		for i := range n {
			a, b := slices.Clone(dev[l][i*used:(i+1)*used]), slices.Clone(cpuRows[i*used:(i+1)*used])
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				return fmt.Sprintf("layer %d, row %d of the last %d: experts %v on the device, %v on the CPU", l, i, n, dev[l][i*used:(i+1)*used], cpuRows[i*used:(i+1)*used])
			}
		}
	}
	return ""
}

// roundingEffect is the largest |rounded − unrounded| over the logits ids (every logit when
// ids is nil); 0 without the unrounded run.
func roundingEffect(rounded, unrounded []float32, ids []int) float64 {
	if unrounded == nil {
		return 0
	}
	worst := 0.0
	if ids == nil {
		for i := range rounded {
			worst = math.Max(worst, math.Abs(float64(rounded[i]-unrounded[i])))
		}
		return worst
	}
	for _, id := range ids {
		worst = math.Max(worst, math.Abs(float64(rounded[id]-unrounded[id])))
	}
	return worst
}

// nearTieEither reports whether the step whose reference leads with first over second by gap
// is a near-tie: gap under tie, or, with the unrounded run's logits, the same two tokens'
// gap there under tie (its order may even be the other one).
func nearTieEither(gap float64, unrounded []float32, first, second int, tie float64) bool {
	if gap < tie {
		return true
	}
	return unrounded != nil && float64(unrounded[first]-unrounded[second]) < tie
}

// promptRouting evaluates prompt token by token on a CPU runner of m and returns how many of its
// leading tokens are routed clear of a tie (RouterMargin at least routerTie): a later row's
// logits depend on the near-tied token's experts, so a comparison ends there. len(prompt) for
// a dense model.
func promptRouting(t *testing.T, m *model.Model, prompt []int) int {
	t.Helper()
	if m.Hyper.MoE.Experts == 0 {
		return len(prompt)
	}
	cr, err := cpu.New(m, cpu.Options{Threads: 1, Context: len(prompt)})
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	for i, tok := range prompt {
		if _, err := cr.Eval([]int{tok}, i, false); err != nil {
			t.Fatal(err)
		}
		if cr.RouterMargin() < routerTie {
			return i
		}
	}
	return len(prompt)
}

// TestNearTieEitherAndRoundingEffect: the two rules that widen a comparison on devices that
// do not round like the reference.
func TestNearTieEitherAndRoundingEffect(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gap       float64
		unrounded []float32
		want      bool
	}{
		{"clear in both", 0.5, []float32{1.0, 0.4}, false},
		{"reference near a tie", 0.1, []float32{1.0, 0.4}, true},
		{"unrounded near a tie", 0.5, []float32{1.0, 0.9}, true},
		{"unrounded the other way", 0.5, []float32{0.2, 0.9}, true},
		{"no unrounded run", 0.5, nil, false},
	} {
		if got := nearTieEither(tc.gap, tc.unrounded, 0, 1, 0.2); got != tc.want {
			t.Errorf("%s: near tie %v, want %v", tc.name, got, tc.want)
		}
	}
	rounded, unrounded := []float32{1, 2, 3}, []float32{1.25, 2, 2.5}
	if got := roundingEffect(rounded, unrounded, nil); got != 0.5 {
		t.Errorf("effect over every logit %g, want 0.5", got)
	}
	if got := roundingEffect(rounded, unrounded, []int{0, 1}); got != 0.25 {
		t.Errorf("effect over logits 0 and 1 %g, want 0.25", got)
	}
	if got := roundingEffect(rounded, nil, nil); got != 0 {
		t.Errorf("effect without an unrounded run %g, want 0", got)
	}
}

// goldenReference is the CPU reference a comparison with llama.cpp's goldens needs on c's
// current tier for m (weights of type typ): nil for a dense model on a
// device whose prompt windows round activations as llama.cpp's CPU does.
func goldenReference(t *testing.T, c *Context, m *model.Model, typ quant.Type, ctx int) *cpuReference {
	t.Helper()
	roundsLike := roundsLikeReference(c, typ, m.Hyper.Dim)
	if roundsLike && m.Hyper.MoE.Experts == 0 {
		return nil
	}
	return newCPUReference(t, m, roundsLike, ctx)
}
