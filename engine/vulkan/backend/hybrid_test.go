package backend

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/vulkan"
)

// The Gated DeltaNet hybrids arm resident: New hands the engine the resident runner and auto
// mode loads them on the GPU under a 1 GiB pin (backend "vulkan", placement "resident"). A plan that does not
// arm them (here VKLLM_GPU_RESIDENT=0, which sends any other model to the split runner) is
// declined with the reason, naming the architecture and that a recurrent stack is never split;
// qwen3, the negative control, takes the split there.
func TestGatedDeltaNetHybridsArmResident(t *testing.T) {
	vulkanOrSkip(t)
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024") // lavapipe reports no budget: the plan's room
	open := func(t *testing.T, arch string) (*gguf.File, *model.Model, string) {
		path := modeltest.TinySynth(t, "", arch, quant.Q8_0, 4)
		m := modeltest.Load(t, path)
		return m.File, m, path
	}
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			f, m, path := open(t, arch)
			if err := vulkan.CheckModel(m); err != nil {
				t.Fatalf("CheckModel: %v, want it accepted", err)
			}
			gr, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			gr.Runner.Close()
			if gr.Backend != "vulkan" || gr.Placement != "resident" {
				t.Fatalf("New: backend %q, placement %q; want vulkan, resident", gr.Backend, gr.Placement)
			}
			e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, Backend: engine.BackendAuto, Threads: 1, Context: 64, DeviceIndex: -1})
			if err != nil {
				t.Fatalf("auto mode: %v", err)
			}
			defer e.Close()
			if info := e.Info(); info.Backend != "vulkan" || info.Placement != "resident" {
				t.Fatalf("auto mode: backend %q, placement %q (CPU reason %q); want vulkan, resident", info.Backend, info.Placement, info.CPUReason)
			}
		})
	}
	t.Run("no split", func(t *testing.T) {
		t.Setenv("VKLLM_GPU_RESIDENT", "0")
		f, m, _ := open(t, "qwen35")
		_, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256})
		if !errors.Is(err, engine.ErrGPUDeclined) || !strings.Contains(err.Error(), `"qwen35"`) || !strings.Contains(err.Error(), "never split") {
			t.Fatalf("err %v, want a decline naming qwen35 and that it is never split", err)
		}
		f, m, _ = open(t, "qwen3")
		gr, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256})
		if err != nil {
			t.Fatalf("qwen3 with VKLLM_GPU_RESIDENT=0: %v, want the split", err)
		}
		defer gr.Runner.Close()
		if !strings.HasPrefix(gr.Placement, "split") {
			t.Fatalf("qwen3 with VKLLM_GPU_RESIDENT=0: placement %q, want a split", gr.Placement)
		}
	})
}
