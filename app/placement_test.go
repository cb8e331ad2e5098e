package app

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/plan"
)

// declinedPlan is a real plan.Compute of a 7B-shaped model (about 11 GB of weights) on an 8 GB
// GPU with pin, as the engine would decline it; the engine's sentence quotes its verdict.
func declinedPlan(t *testing.T, pin plan.Pin, budget bool, ctx int) (plan.Plan, string) {
	t.Helper()
	m := plan.Model{Name: "seven", Arch: "llama", Layers: 32, Embd: 4096, FF: 14336, Heads: 32, HeadsKV: 8,
		HeadDimK: 128, HeadDimV: 128, Vocab: 32000, CtxLength: 32768}
	var specs []plan.TensorSpec
	specs = append(specs, plan.TensorSpec{Name: "token_embd.weight", Type: "Q8_0", Size: 125 * plan.MiB})
	for i := range 32 {
		specs = append(specs, plan.TensorSpec{Name: "blk." + itoa(i) + ".ffn_up.weight", Type: "Q8_0", Size: 340 * plan.MiB})
	}
	ups, err := plan.UploadList(specs)
	if err != nil {
		t.Fatal(err)
	}
	dev := plan.Device{Name: "Test GPU", Key: "test-gpu", HeapBytes: 8000 * plan.MiB, MaxStorageBufferRange: 4*plan.GiB - 1}
	if budget {
		dev.BudgetReported, dev.BudgetBytes, dev.UsageBytes = true, 6000*plan.MiB, 1000*plan.MiB
	}
	p := plan.Compute(plan.Input{Model: m, Uploads: ups, KV: plan.KVFor(m), Scratch: plan.ScratchFor(m), Device: dev, Pin: pin,
		Ctx: plan.CtxRequest{Requested: ctx}})
	if p.Verdict.Armed {
		t.Fatalf("the plan armed: %s", p.Verdict.Text)
	}
	return p, `On the CPU: declined by the plan, "` + p.Verdict.Text + `".`
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// TestTheHeaderSaysAPlanDeclineInTheAppsWords: the engine's sentence names VKLLM_GPU_VRAM_MB and
// `vkllm pin set`; the app's names the numbers in words and the remedy the app offers.
func TestTheHeaderSaysAPlanDeclineInTheAppsWords(t *testing.T) {
	cases := []struct {
		name   string
		pin    plan.Pin
		budget bool
		ctx    int
		want   []string // phrases the sentence holds
	}{
		{"a stored pin", plan.Pin{MB: 4000, Source: plan.PinStore}, false, 4096,
			[]string{"the model needs 11866 MB of GPU memory at a context of 4096 tokens (weights 11005 MB, KV cache 512 MB, scratch 349 MB)", "this GPU's VRAM pin allows 4000 MB", "Raise this GPU's VRAM pin in the Pins tab"}},
		{"a pin the app was started with", plan.Pin{MB: 1, Source: plan.PinEnv}, false, 4096,
			[]string{"the VRAM limit the app was started with allows 1 MB", "Start the app without that limit"}},
		{"the driver's budget", plan.Pin{}, true, 32768,
			[]string{"MB free for it (6000 MB budget, 1000 MB in use, ", "Close other programs using the GPU, or pin more"}},
		{"the heap with its headroom", plan.Pin{}, false, 32768,
			[]string{"the plan may use 3904 MB of Test GPU's 8000 MB", "Pin more of its memory in the Pins tab"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, engineSays := declinedPlan(t, c.pin, c.budget, c.ctx)
			raw, _ := json.Marshal(p)
			var asked []PlanRequest
			x := NewPlacementExplainer(func(_ context.Context, req PlanRequest) (json.RawMessage, error) {
				asked = append(asked, req)
				return raw, nil
			})
			info := engine.ModelInfo{Name: "seven", Path: "/m/seven.gguf", Backend: "cpu", Placement: "cpu", CPUReason: engineSays}
			o := LoadOptions{Context: c.ctx, Device: "gpu:0"}
			got := x.Explain(context.Background(), info, o).CPUReason
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("the header says %q, want it to hold %q", got, w)
				}
			}
			if strings.Contains(got, "VKLLM_") || strings.Contains(got, "vkllm pin") || strings.Contains(got, "--") {
				t.Errorf("the header names a CLI setting: %q", got)
			}
			if !regexp.MustCompile(`needs \d+ MB`).MatchString(got) {
				t.Errorf("the header gives no need in MB: %q", got)
			}
			// Once per load: asked again, the kept sentence answers.
			x.Explain(context.Background(), info, o)
			if len(asked) != 1 || asked[0].Model != info.Path || asked[0].Ctx != c.ctx || asked[0].Device == nil || *asked[0].Device != 0 {
				t.Errorf("the plan was asked %+v, want once for the load's model, context and device", asked)
			}
		})
	}
}

func TestEveryWayToTheCPUIsSaidWithoutTheCLIsSettings(t *testing.T) {
	cases := []struct {
		name, engineSays string
		o                LoadOptions
		want             string
	}{
		{"the load options chose the CPU", "On the CPU: forced by --cpu.", LoadOptions{Device: DeviceCPU}, CPUChosenReason},
		{"the engine started on the CPU", "On the CPU: forced by --cpu.", LoadOptions{}, "choose a GPU or Automatic in Load options"},
		{"the whole-model placement turned off", `On the CPU: forced by VKLLM_GPU_RESIDENT=0, and the partial offload puts no layer on the GPU (the plan: "resident driver declined - VKLLM_GPU_RESIDENT=0 forces …").`, LoadOptions{}, "whole-model GPU loading turned off"},
		{"a device setting naming no GPU", "On the CPU: forced by VKLLM_DEVICE=9, which names no Vulkan device (`vkllm devices` lists them).", LoadOptions{}, "pick a device in Load options"},
		{"out of memory", "On the CPU: Big GPU ran out of memory uploading the model (900 MB planned; out of device memory); pin less VRAM (VKLLM_GPU_VRAM_MB or vkllm pin set) or close what else uses the GPU.", LoadOptions{},
			"Big GPU ran out of memory loading the model (900 MB planned); lower this GPU's VRAM pin in the Pins tab"},
		{"no device: already in words", "On the CPU: no Vulkan device found; install your GPU's Vulkan driver, or Mesa's lavapipe (apt install mesa-vulkan-drivers).", LoadOptions{}, "no Vulkan device found"},
		{"a sentence the app has no words for", "On the CPU: the GPU backend declined (VKLLM_SOMETHING went wrong).", LoadOptions{}, "the app's log says why"},
		{"a plan decline with no plan to ask", `On the CPU: declined by the plan, "resident driver declined - needs 3 MB of 1 MB (weights alone 1 MB) - VKLLM_GPU_VRAM_MB pins the cap at 1 MB".`, LoadOptions{}, "the Model tab's plan gives the numbers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info := engine.ModelInfo{Backend: "cpu", Placement: "cpu", CPUReason: c.engineSays}
			got := NewPlacementExplainer(nil).Explain(context.Background(), info, c.o).CPUReason
			if !strings.Contains(got, c.want) {
				t.Errorf("the header says %q, want %q in it", got, c.want)
			}
			if strings.Contains(got, "VKLLM_") || strings.Contains(got, "--") || strings.Contains(got, "vkllm ") {
				t.Errorf("the header names a CLI setting: %q", got)
			}
			// Said twice (the services pass a model through more than once), the words stay.
			info.CPUReason = got
			if again := ExplainPlacement(info, c.o).CPUReason; again != got {
				t.Errorf("explained again: %q, want %q unchanged", again, got)
			}
		})
	}
	// On a GPU there is no reason, whatever the engine said (control).
	if got := ExplainPlacement(engine.ModelInfo{Backend: "vulkan", Placement: "resident"}, LoadOptions{}).CPUReason; got != "" {
		t.Errorf("a model on the GPU gets the reason %q", got)
	}
}

func TestNoModelIsSaidInOneSentence(t *testing.T) {
	cases := []struct{ err, want string }{
		{`engine /vkllm/model: no model loaded (open a model file first; API: POST /vkllm/load {"path": ...})`, NoModelLoaded},
		{"engine /vkllm/model: no model loaded: the last load failed: load model: bad (open another model file; API: POST /vkllm/load)", "No model loaded: the last one did not load — open one in the Model tab."},
		{"engine /vkllm/model: dial tcp 127.0.0.1:1: connect: connection refused", "The engine is starting; the model shows here once it is loaded."},
	}
	for _, c := range cases {
		s := NewModelService(context.Background(), &noModelEngine{err: errors.New(c.err)}, EmitterFunc(func(string, any) {}))
		_, err := s.Current()
		if err == nil || err.Error() != c.want {
			t.Errorf("Current with the engine saying %q = %v, want %q", c.err, err, c.want)
		}
	}
}

// noModelEngine is an engine holding no model: Model fails with err.
type noModelEngine struct {
	fakeEngine
	err error
}

func (e *noModelEngine) Model(context.Context) (engine.ModelInfo, error) {
	return engine.ModelInfo{}, e.err
}
