package backend

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/sample"
	"github.com/vkllm/vkllm/engine/vulkan"
)

const sharedDir = "../../../../shared"

func openModel(t *testing.T) (*gguf.File, *model.Model) {
	t.Helper()
	return openNamed(t, "stories260K")
}

func openNamed(t *testing.T, name string) (*gguf.File, *model.Model) {
	t.Helper()
	f, err := gguf.Open(filepath.Join(sharedDir, "models", name+".gguf"))
	if err != nil {
		t.Skipf("shared model not available: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

func vulkanOrSkip(t *testing.T) {
	t.Helper()
	if _, err := vulkan.Devices(); err != nil {
		t.Skipf("no Vulkan here: %v", err)
	}
}

// loadPinned loads the shared stories260K on the Vulkan backend under a 1024 MiB pin (lavapipe
// reports no budget) with a context of ctxLen, the runner closed when the test ends; it skips
// where there is no Vulkan.
func loadPinned(t *testing.T, ctxLen int) (engine.GPURunner, *model.Model) {
	t.Helper()
	vulkanOrSkip(t)
	f, m := openModel(t)
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024")
	t.Setenv("VKLLM_DEVICE", "")
	gr, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: ctxLen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gr.Runner.Close() })
	return gr, m
}

func TestArmsUnderAGenerousPinAndRunsTheModel(t *testing.T) {
	gr, _ := loadPinned(t, 256)
	if gr.Backend != "vulkan" || gr.Placement != "resident" || gr.Context != 256 {
		t.Fatalf("runner %+v, want vulkan resident at ctx 256", gr)
	}
	// "Once upon a time" → ", there" in the shared reference (token 432 first).
	logits, err := gr.Runner.Eval([]int{1, 403, 407, 261, 378}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	if best != 432 {
		t.Fatalf("first greedy token %d, want 432", best)
	}
}

func TestDeclinesUnderATightPin(t *testing.T) {
	vulkanOrSkip(t)
	f, m := openModel(t)
	t.Setenv("VKLLM_GPU_VRAM_MB", "1")
	_, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256})
	if !errors.Is(err, engine.ErrGPUDeclined) {
		t.Fatalf("1 MiB pin: err %v, want ErrGPUDeclined", err)
	}
	t.Logf("declined: %v", err)
}

// The plan and the driver walk the same tensors: the weight and KV bytes the plan counts are
// the bytes the driver allocates, for the shared models and for random qwen2/qwen3 models
// (biases, head norms), a llama model with rope_freqs (which stays on the host) and the tiny
// qwen3moe and qwen2moe (router, 3-D expert tensors, the shared expert and its gate); for the
// Gated DeltaNet hybrids (KV only for the attention layers, the DeltaNet blocks' weights) the
// recurrent state too.
func TestPlanBytesEqualDriverAllocations(t *testing.T) {
	vulkanOrSkip(t)
	devs, err := vulkan.Devices()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024")
	synth := func(s modeltest.Spec) func(t *testing.T) *gguf.File {
		return func(t *testing.T) *gguf.File {
			b, err := modeltest.Bytes(s)
			if err != nil {
				t.Fatal(err)
			}
			f, err := gguf.OpenBytes(s.Arch+".gguf", b)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	shared := func(name string) func(t *testing.T) *gguf.File {
		return func(t *testing.T) *gguf.File {
			f, err := gguf.Open(filepath.Join(sharedDir, "models", name+".gguf"))
			if err != nil {
				t.Skipf("shared model not available: %v", err)
			}
			return f
		}
	}
	tiny := func(arch string, typ quant.Type) func(t *testing.T) *gguf.File {
		return func(t *testing.T) *gguf.File {
			f, err := gguf.Open(modeltest.TinySynth(t, "", arch, typ, 3))
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	roped := modeltest.Small("llama", quant.Q4_0, 5)
	roped.RopeFactors = true
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *gguf.File
		ctx  int
	}{
		{"stories260K", shared("stories260K"), 256},
		{"rand-llama-q4_0", shared("rand-llama-q4_0"), 256},
		{"rand-llama-f16", shared("rand-llama-f16"), 256},
		{"qwen2-Q4_K", synth(modeltest.Small("qwen2", quant.Q4_K, 9)), 64},
		{"qwen3-Q4_K", synth(modeltest.Small("qwen3", quant.Q4_K, 9)), 64},
		{"llama-rope_freqs", synth(roped), 64},
		{"qwen3moe-Q4_K", tiny("qwen3moe", quant.Q4_K), 64},
		{"qwen2moe-IQ4_XS", tiny("qwen2moe", quant.IQ4_XS), 64},
		{"qwen35-Q8_0", tiny("qwen35", quant.Q8_0), 64},
		{"qwen35moe-Q8_0", tiny("qwen35moe", quant.Q8_0), 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.open(t)
			defer f.Close()
			m, err := model.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "llama-rope_freqs" && m.Hyper.Rope.Factors == nil {
				t.Fatal("the model's rope_freqs.weight did not load")
			}
			p, err := planinput.ForDevice(f, devs[0], 0, tc.ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			c, err := vulkan.Open(vulkan.Options{Device: 0, Quiet: true})
			if err != nil {
				t.Fatal(err)
			}
			r, err := vulkan.NewResident(c, m, vulkan.ResidentOptions{Context: p.Ctx.Chosen, OwnContext: true})
			if err != nil {
				c.Close()
				t.Fatal(err)
			}
			defer r.Close()
			if int64(r.Bytes.Weights) != p.Weights.Bytes {
				t.Errorf("weights: driver %d bytes, plan %d", r.Bytes.Weights, p.Weights.Bytes)
			}
			if int64(r.Bytes.KV) != p.KVBytes {
				t.Errorf("KV at ctx %d: driver %d bytes, plan %d", p.Ctx.Chosen, r.Bytes.KV, p.KVBytes)
			}
			if int64(r.Bytes.Recurrent) != p.Scratch.RecurrentState {
				t.Errorf("recurrent state: driver %d bytes, plan %d", r.Bytes.Recurrent, p.Scratch.RecurrentState)
			}
			if int64(r.Bytes.Scratch) > p.Scratch.Total {
				t.Errorf("scratch: driver %d bytes over the plan's estimate %d", r.Bytes.Scratch, p.Scratch.Total)
			}
		})
	}
}

// The per-machine pin saved in the store reaches the plan through LoadOptions.StoredPinMB, and
// VKLLM_GPU_VRAM_MB still wins over it. Device-agnostic: a tight stored pin must decline on any
// device (without it a large GPU would arm), a generous one must arm.
func TestStoredPinArmsAndTheEnvironmentPinWins(t *testing.T) {
	vulkanOrSkip(t)
	f, m := openModel(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_VRAM_MB", "")
	pinned := func(mb int, asked *string) func(context.Context, string) int {
		return func(_ context.Context, key string) int { *asked = key; return mb }
	}

	var key string
	_, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256, StoredPinMB: pinned(1, &key)})
	if !errors.Is(err, engine.ErrGPUDeclined) || !strings.Contains(err.Error(), "of 1 MB") {
		t.Fatalf("a stored 1 MiB pin must decline with the pin as the room, got %v", err)
	}
	if key == "" {
		t.Fatal("the stored pin was not asked for the chosen device's key")
	}

	gr, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256, StoredPinMB: pinned(1024, &key)})
	if err != nil {
		t.Fatalf("a stored 1024 MiB pin should arm: %v", err)
	}
	gr.Runner.Close()
	if gr.Placement != "resident" {
		t.Fatalf("placement %q, want resident", gr.Placement)
	}

	t.Setenv("VKLLM_GPU_VRAM_MB", "1024")
	gr, err = New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256, StoredPinMB: pinned(1, &key)})
	if err != nil {
		t.Fatalf("the env pin (1024 MiB) must win over the stored 1 MiB pin: %v", err)
	}
	gr.Runner.Close()
}

// The Vulkan backend's runner draws a sampled generation on its device by default: it is an
// engine.SamplingRunner (what engine.Generate looks for) and takes the app's chat settings, so
// a chat's tokens are drawn by sample_token with the next step queued. Without the method, with
// the switch off or with the chain unwired, the app's chat falls back to the host's draw and
// this fails.
func TestTheRunnerDrawsTheAppsSamplingOnItsDevice(t *testing.T) {
	gr, m := loadPinned(t, 64)
	sr, ok := gr.Runner.(engine.SamplingRunner)
	if !ok {
		t.Fatalf("the runner %T does not draw on its device (engine.SamplingRunner)", gr.Runner)
	}
	app := sample.Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05, Seed: 1}
	if !sr.SamplesOnDevice(app) {
		t.Fatal("the runner does not draw the app's chat settings on its device")
	}
	if sr.SamplesOnDevice(sample.Params{Temperature: 0.7, RepeatPenalty: 1.1}) {
		t.Fatal("the runner claims to draw with a repetition penalty, which needs the history")
	}
	if _, err := gr.Runner.Eval([]int{1, 403, 407}, 0, false); err != nil {
		t.Fatal(err)
	}
	tok := 261
	for i := 0; i < 4; i++ {
		var err error
		if tok, err = sr.Sample(tok, 3+i, app, 0.25*float64(i)+0.1, 0.25*float64(i+1)+0.1); err != nil {
			t.Fatal(err)
		}
		if tok < 0 || tok >= m.Hyper.VocabSize {
			t.Fatalf("step %d drew token %d of a %d-token vocabulary", i, tok, m.Hyper.VocabSize)
		}
	}
}
