package vulkan_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/vulkan"
	_ "github.com/vkllm/vkllm/engine/vulkan/backend" // registers the "vulkan" GPU backend
)

// greedyTokens evaluates prompt then steps greedy tokens through e's runner.
func greedyTokens(t *testing.T, e *engine.Engine, prompt []int, steps int) []int {
	t.Helper()
	r := e.Runner()
	r.Reset()
	logits, err := r.Eval(prompt, 0, false)
	if err != nil {
		t.Fatalf("%s prefill: %v", r.Name(), err)
	}
	var out []int
	for i := range steps {
		best := 0
		for j, v := range logits {
			if v > logits[best] {
				best = j
			}
		}
		out = append(out, best)
		if logits, err = r.Eval([]int{best}, len(prompt)+i, false); err != nil {
			t.Fatalf("%s decode: %v", r.Name(), err)
		}
	}
	return out
}

func loadEngine(t *testing.T, path string, backend engine.Backend) *engine.Engine {
	t.Helper()
	e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, Backend: backend, DeviceIndex: -1, Context: 64, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// engineQwenPrompt is a prompt of the random models' vocabulary.
var engineQwenPrompt = []int{1, 262, 300, 275, 307, 260, 310}

// engine.Load under a generous VRAM pin puts qwen2 and qwen3 models on the Vulkan resident
// driver, which continues a prompt with the CPU backend's greedy tokens; under a pin that fits
// only some layers it runs them split ("split k of L", the first layers on the CPU) with the
// same tokens.
func TestEngineLoadsQwenResidentAndSplit(t *testing.T) {
	if _, err := vulkan.Devices(); err != nil {
		t.Skipf("no Vulkan here: %v", err)
	}
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	const steps = 8
	for _, arch := range []string{"qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			// Layers large enough (F32, dim 512) that a whole-MiB pin can hold some but not all.
			spec := modeltest.Small(arch, quant.F32, 5)
			spec.Dim, spec.FFN, spec.Layers = 512, 512, 4
			path := filepath.Join(t.TempDir(), arch+".gguf")
			if err := modeltest.WriteFile(path, spec); err != nil {
				t.Fatal(err)
			}
			want := greedyTokens(t, loadEngine(t, path, engine.BackendCPU), engineQwenPrompt, steps)

			t.Setenv("VKLLM_GPU_VRAM_MB", "1024")
			e := loadEngine(t, path, engine.BackendAuto)
			if info := e.Info(); info.Backend != "vulkan" || info.Placement != "resident" || info.Arch != arch {
				t.Fatalf("loaded on %q %q (arch %q), want vulkan resident %s", info.Backend, info.Placement, info.Arch, arch)
			}
			if got := greedyTokens(t, e, engineQwenPrompt, steps); !equalTokens(got, want) {
				t.Fatalf("resident greedy %v, cpu %v", got, want)
			}
			// Generate's greedy steps take the device's argmax (Resident.Greedy): the same tokens
			// (up to an end-of-generation token, where it stops)
			res, err := e.Generate(context.Background(), engine.GenerateRequest{PromptTokens: engineQwenPrompt, MaxTokens: steps}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(res.Generated); n == 0 || !equalTokens(res.Generated, want[:n]) || (n < steps && res.Stop != engine.StopEOS) {
				t.Fatalf("resident Generate %v (stop %q), cpu greedy %v", res.Generated, res.Stop, want)
			}
			e.Close()

			mb, layers := splitPin(t, path)
			t.Setenv("VKLLM_GPU_VRAM_MB", fmt.Sprint(mb))
			e = loadEngine(t, path, engine.BackendAuto)
			wantPlacement := fmt.Sprintf("split %d of %d", layers, spec.Layers)
			if info := e.Info(); info.Backend != "vulkan" || info.Placement != wantPlacement {
				t.Fatalf("pin %d MiB: loaded on %q %q, want vulkan %q", mb, info.Backend, info.Placement, wantPlacement)
			}
			if got := greedyTokens(t, e, engineQwenPrompt, steps); !equalTokens(got, want) {
				t.Fatalf("pin %d MiB (%s): split greedy %v, cpu %v", mb, wantPlacement, got, want)
			}
			t.Logf("tokens %v; pin %d MiB runs %s", want, mb, wantPlacement)
		})
	}
}

// splitPin is the smallest VRAM pin (MiB) under which the plan of the model at path declines
// the resident driver and splits with some but not all layers on the GPU, and its GPU layers.
func splitPin(t *testing.T, path string) (mb, gpuLayers int) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	devs, err := vulkan.Devices()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := vulkan.ChooseDevice(devs, -1)
	if err != nil {
		t.Fatal(err)
	}
	planAt := func(mb int) plan.Plan {
		t.Setenv("VKLLM_GPU_VRAM_MB", fmt.Sprint(mb))
		p, err := planinput.ForDevice(f, dev, 0, 64, false)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// No pin below the scratch holds a layer.
	for mb := max(1, int(plan.MBDown(planAt(1).Scratch.Total))); mb <= 1024; mb++ {
		p := planAt(mb)
		if p.Verdict.Armed {
			break
		}
		if sp := p.Split; sp != nil && sp.GPULayers > 0 && sp.GPULayers < sp.Layers {
			return mb, sp.GPULayers
		}
	}
	t.Fatalf("no pin up to 1024 MiB splits %s", path)
	return 0, 0
}

func equalTokens(a, b []int) bool {
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
