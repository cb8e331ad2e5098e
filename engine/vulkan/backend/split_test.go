package backend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/cpu"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/vulkan"
)

const testCtx = 256

// splitCtx is the context the split tests plan at: stories260K's layers are so small that at
// 256 positions all five fit in the same MiB, so it plans at 8192 (1 MiB of KV per layer).
func splitCtx(name string) int {
	if name == "stories260K" {
		return 8192
	}
	return testCtx
}

// refPrompt is the first prompt of the shared reference for name, with llama.cpp's greedy ids
// and the top-2 logit gap of each step.
type refPrompt struct {
	tokens, generated []int
	gaps              []float64
}

func readRefPrompt(t *testing.T, name string) refPrompt {
	t.Helper()
	f, err := os.Open(filepath.Join(sharedDir, "reference", "generation", name+".jsonl"))
	if err != nil {
		t.Skipf("shared reference not available: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	if !sc.Scan() {
		t.Fatalf("%s.jsonl: no prompt", name)
	}
	var c struct {
		PromptTokens []int          `json:"prompt_tokens"`
		Generated    []int          `json:"generated"`
		Top5         [][][2]float64 `json:"top5_logits"`
	}
	if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
		t.Fatalf("%s.jsonl: %v", name, err)
	}
	r := refPrompt{tokens: c.PromptTokens, generated: c.Generated}
	for _, top := range c.Top5 {
		r.gaps = append(r.gaps, top[0][1]-top[1][1])
	}
	return r
}

// greedy generates steps tokens after the prompt with r.
func greedy(t *testing.T, r model.Runner, prompt []int, steps int) []int {
	t.Helper()
	r.Reset()
	logits, err := r.Eval(prompt, 0, false)
	if err != nil {
		t.Fatalf("%s prefill: %v", r.Name(), err)
	}
	var out []int
	for pos := len(prompt); len(out) < steps; pos++ {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		out = append(out, best)
		if logits, err = r.Eval([]int{best}, pos, false); err != nil {
			t.Fatalf("%s decode at %d: %v", r.Name(), pos, err)
		}
	}
	return out
}

func device(t *testing.T) vulkan.DeviceInfo {
	t.Helper()
	devs, err := vulkan.Devices()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := vulkan.ChooseDevice(devs, -1)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// planAt plans f at ctx on dev under a VKLLM_GPU_VRAM_MB pin of mb (which it leaves set).
func planAt(t *testing.T, f *gguf.File, dev vulkan.DeviceInfo, mb, ctx int) plan.Plan {
	t.Helper()
	t.Setenv("VKLLM_GPU_VRAM_MB", fmt.Sprint(mb))
	p, err := planinput.ForDevice(f, dev, 0, ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// splitPin is the smallest pin (MiB) under which the plan declines and splits with some but
// not all layers on the GPU (it leaves VKLLM_GPU_VRAM_MB set to it); the test fails when no
// pin does.
func splitPin(t *testing.T, f *gguf.File, ctx int) (int, plan.Plan) {
	t.Helper()
	pins := splitPins(t, f, ctx)
	t.Setenv("VKLLM_GPU_VRAM_MB", fmt.Sprint(pins[0].mb))
	return pins[0].mb, pins[0].p
}

type pinPlan struct {
	mb int
	p  plan.Plan
}

// splitPins is the smallest pin of each distinct split (GPU layers, head placement) with some
// but not all layers on the GPU, smallest first; the test fails when no pin splits.
func splitPins(t *testing.T, f *gguf.File, ctx int) []pinPlan {
	t.Helper()
	dev := device(t)
	first := int(plan.MBDown(planAt(t, f, dev, 1, ctx).Scratch.Total))
	var out []pinPlan
	for mb := max(first, 1); mb <= 1024; mb++ {
		p := planAt(t, f, dev, mb, ctx)
		if p.Verdict.Armed {
			break
		}
		sp := p.Split
		if sp == nil || sp.GPULayers == 0 || sp.GPULayers == sp.Layers {
			continue
		}
		if n := len(out); n > 0 && out[n-1].p.Split.GPULayers == sp.GPULayers && out[n-1].p.Split.OutputOnGPU == sp.OutputOnGPU {
			continue
		}
		out = append(out, pinPlan{mb, p})
	}
	if len(out) == 0 {
		t.Fatalf("no pin up to 1024 MiB splits %s at ctx %d", f.Path, ctx)
	}
	return out
}

// Under a pin that fits only some layers, the backend runs the split ("split k of L"): the
// same greedy tokens as the resident driver under a generous pin, as the CPU path, and as
// llama.cpp's reference up to its first near-tie.
func TestSplitPinRunsSplitWithTheResidentAndCPUTokens(t *testing.T) {
	vulkanOrSkip(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	const steps = 10
	for _, name := range []string{"stories260K", "rand-llama-q8_0"} {
		t.Run(name, func(t *testing.T) {
			f, m := openNamed(t, name)
			ref := readRefPrompt(t, name)
			ctx := splitCtx(name)
			opts := engine.LoadOptions{DeviceIndex: -1, Context: ctx}

			t.Setenv("VKLLM_GPU_VRAM_MB", "1024")
			res, err := New(context.Background(), f, m, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := greedy(t, res.Runner, ref.tokens, steps)
			res.Runner.Close()

			cr, err := cpu.New(m, cpu.Options{Threads: 2, Context: ctx})
			if err != nil {
				t.Fatal(err)
			}
			defer cr.Close()
			if c := greedy(t, cr, ref.tokens, steps); !equalInts(c, want) {
				t.Fatalf("cpu greedy %v, resident %v", c, want)
			}
			for i, id := range ref.generated[:min(steps, len(ref.generated))] {
				if ref.gaps[i] < 0.05 {
					break // a near-tie: either leading token is right, and the comparison stops
				}
				if want[i] != id {
					t.Fatalf("step %d: resident token %d, reference %d", i, want[i], id)
				}
			}
			heads := map[bool]bool{}
			for _, pp := range splitPins(t, f, ctx) {
				mb, p := pp.mb, pp.p
				heads[p.Split.OutputOnGPU] = true
				t.Setenv("VKLLM_GPU_VRAM_MB", fmt.Sprint(mb))
				sp, err := New(context.Background(), f, m, opts)
				if err != nil {
					t.Fatalf("pin %d MiB: %v", mb, err)
				}
				wantPlacement := fmt.Sprintf("split %d of %d", p.Split.GPULayers, m.Hyper.Layers)
				if sp.Placement != wantPlacement || sp.Backend != "vulkan" || sp.Context != ctx {
					sp.Runner.Close()
					t.Fatalf("pin %d MiB: runner %s %q ctx %d, want vulkan %q ctx %d", mb, sp.Backend, sp.Placement, sp.Context, wantPlacement, ctx)
				}
				got := greedy(t, sp.Runner, ref.tokens, steps)
				sp.Runner.Close()
				if !equalInts(got, want) {
					t.Fatalf("pin %d MiB (%s, head on GPU %v): split greedy %v, resident %v", mb, wantPlacement, p.Split.OutputOnGPU, got, want)
				}
				t.Logf("pin %d MiB: %s, head on GPU %v", mb, p.Split.Text(), p.Split.OutputOnGPU)
			}
			t.Logf("tokens %v; head placements covered: %v", want, heads)
		})
	}
}

// VKLLM_GPU_RESIDENT=0 forces the split even where the model fits whole: all layers go to the
// GPU as a split, with the resident driver's tokens.
func TestResidentZeroForcesTheSplit(t *testing.T) {
	vulkanOrSkip(t)
	f, m := openModel(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	ref := readRefPrompt(t, "stories260K")
	opts := engine.LoadOptions{DeviceIndex: -1, Context: testCtx}
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024")
	res, err := New(context.Background(), f, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := greedy(t, res.Runner, ref.tokens, 8)
	res.Runner.Close()

	t.Setenv("VKLLM_GPU_RESIDENT", "0")
	p := planAt(t, f, device(t), 1024, testCtx)
	if p.Verdict.Armed || !p.Verdict.Forced || p.Split == nil {
		t.Fatalf("VKLLM_GPU_RESIDENT=0: verdict %+v split %+v, want a forced split", p.Verdict, p.Split)
	}
	sp, err := New(context.Background(), f, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Runner.Close()
	if want := fmt.Sprintf("split %d of %d", m.Hyper.Layers, m.Hyper.Layers); sp.Placement != want {
		t.Fatalf("placement %q, want %q", sp.Placement, want)
	}
	if got := greedy(t, sp.Runner, ref.tokens, 8); !equalInts(got, want) {
		t.Fatalf("forced split greedy %v, resident %v", got, want)
	}
}

// Under a pin too small for even one layer beside the scratch, the split has no GPU layer:
// the backend declines with the plan's exact verdict text and the engine keeps the CPU.
func TestTightPinDeclinesWithTheExactVerdict(t *testing.T) {
	vulkanOrSkip(t)
	f, m := openModel(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	p := planAt(t, f, device(t), 1, testCtx)
	if p.Split == nil || p.Split.GPULayers != 0 {
		t.Fatalf("1 MiB pin: split %+v, want no GPU layer", p.Split)
	}
	_, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: testCtx})
	const want = "gpu backend declined: resident driver declined - needs 71 MB of 1 MB (weights alone 2 MB) - VKLLM_GPU_VRAM_MB pins the cap at 1 MB, so no headroom stands; raise it or unset it to plan from the device"
	if !errors.Is(err, engine.ErrGPUDeclined) || err.Error() != want {
		t.Fatalf("1 MiB pin:\n got %v\nwant %s", err, want)
	}
}

// engine.Load with the split pin reports the placement and logs the split line; with the
// generous pin it reports "resident".
func TestLoadReportsTheSplitPlacementAndLogsTheSplitLine(t *testing.T) {
	vulkanOrSkip(t)
	path := filepath.Join(sharedDir, "models", "rand-llama-q8_0.gguf")
	f, _ := openNamed(t, "rand-llama-q8_0")
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	mb, p := splitPin(t, f, testCtx)
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, DeviceIndex: -1, Context: testCtx})
	if err != nil {
		t.Fatalf("pin %d MiB: %v", mb, err)
	}
	defer e.Close()
	info := e.Info()
	if want := fmt.Sprintf("split %d of %d", p.Split.GPULayers, p.Split.Layers); info.Backend != "vulkan" || info.Placement != want {
		t.Fatalf("ModelInfo backend %q placement %q, want vulkan %q", info.Backend, info.Placement, want)
	}
	if line := p.Split.Text(); !strings.Contains(logs.String(), `msg="`+line+`"`) {
		t.Fatalf("log lacks the split line %q:\n%s", line, logs.String())
	}
}

// The plan's split accounting equals what the split runner allocates on the device: its
// layers' weights, their KV at the plan's context, the head where the plan put it, and a
// scratch within the plan's estimate.
func TestSplitPlanBytesEqualDriverAllocations(t *testing.T) {
	vulkanOrSkip(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	for _, name := range []string{"stories260K", "rand-llama-q8_0", "rand-llama-f16"} {
		t.Run(name, func(t *testing.T) {
			f, m := openNamed(t, name)
			_, p := splitPin(t, f, splitCtx(name))
			sp := p.Split
			for _, head := range []bool{sp.OutputOnGPU, !sp.OutputOnGPU} {
				c, err := vulkan.Open(vulkan.Options{Device: p.Device.Index, Quiet: true})
				if err != nil {
					t.Fatal(err)
				}
				s, err := vulkan.NewSplit(c, m, vulkan.SplitOptions{Context: sp.Ctx, FirstGPULayer: sp.FirstGPULayer, HeadOnGPU: head, OwnContext: true})
				if err != nil {
					c.Close()
					t.Fatal(err)
				}
				b := s.Bytes()
				s.Close()
				wantKV := int64(sp.GPULayers) * int64(sp.Ctx) * p.KV.LayerPos
				wantHead := int64(0)
				if head {
					wantHead = sp.HeadBytes
				}
				if int64(b.KV) != wantKV {
					t.Errorf("head on GPU %v: KV driver %d bytes, plan %d", head, b.KV, wantKV)
				}
				if int64(b.Head) != wantHead {
					t.Errorf("head on GPU %v: head driver %d bytes, plan %d", head, b.Head, wantHead)
				}
				if int64(b.Scratch) > p.Scratch.Total {
					t.Errorf("head on GPU %v: scratch driver %d bytes over the plan's estimate %d", head, b.Scratch, p.Scratch.Total)
				}
				if head == sp.OutputOnGPU {
					if got := int64(b.Layers+b.Head+b.KV) + p.Scratch.Total; got != sp.GPUBytes {
						t.Errorf("driver layers %d + head %d + KV %d + plan scratch %d = %d bytes, plan's split %d", b.Layers, b.Head, b.KV, p.Scratch.Total, got, sp.GPUBytes)
					}
				}
				if b.Weights != b.Layers+b.Head {
					t.Errorf("driver weights %d bytes, layers %d + head %d", b.Weights, b.Layers, b.Head)
				}
			}
		})
	}
}

// After warm-up the runner hands the re-read device to the spill check, which warns (once per
// runner, through slog) only when usage passed the budget, naming a smaller pin.
func TestSpillCheckWarnsOnlyPastTheBudget(t *testing.T) {
	p := plan.Plan{UsableBytes: 6 << 30}
	dev := func(budget, usage uint64) vulkan.DeviceInfo {
		return vulkan.DeviceInfo{Name: "test gpu", BudgetReported: true,
			Heaps: []vulkan.Heap{{Size: 8 << 30, DeviceLocal: true, Budget: budget, Usage: usage}}}
	}
	for _, tc := range []struct {
		name          string
		budget, usage uint64
		warn          bool
	}{
		{"within the budget", 7 << 30, 6 << 30, false},
		{"past the budget", 7 << 30, 7<<30 + 300<<20, true},
	} {
		var logs bytes.Buffer
		prev := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
		spillCheck(p)(dev(tc.budget, tc.usage))
		slog.SetDefault(prev)
		got := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "VKLLM_GPU_VRAM_MB=")
		if got != tc.warn {
			t.Errorf("%s: warned %v, want %v:\n%s", tc.name, got, tc.warn, logs.String())
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Where the split has no GPU layer, engine.Load keeps the CPU and logs the decline as the
// reason.
func TestLoadWithNoGPULayerRunsOnTheCPUWithTheReason(t *testing.T) {
	vulkanOrSkip(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	t.Setenv("VKLLM_GPU_VRAM_MB", "1")
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	e, err := engine.Load(context.Background(), engine.LoadOptions{Path: filepath.Join(sharedDir, "models", "stories260K.gguf"), DeviceIndex: -1, Context: testCtx})
	if err != nil {
		t.Skipf("shared model not available: %v", err)
	}
	defer e.Close()
	if info := e.Info(); info.Backend != "cpu" || info.Placement != "cpu" {
		t.Fatalf("1 MiB pin: backend %q placement %q, want cpu", info.Backend, info.Placement)
	}
	if !strings.Contains(logs.String(), `msg="running on the CPU" reason="gpu backend declined: resident driver declined - needs`) {
		t.Fatalf("log lacks the decline reason:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), `msg="split:`) {
		t.Fatalf("log has a split line although no layer went to the GPU:\n%s", logs.String())
	}
}
