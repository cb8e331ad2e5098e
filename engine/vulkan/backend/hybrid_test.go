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

// The Gated DeltaNet hybrids are declined before any device is looked at or anything uploaded,
// naming the architecture and that the CPU serves it; auto mode then loads them on the CPU with
// that reason. qwen3, the negative control, passes the same check.
func TestGatedDeltaNetHybridsAreDeclinedForTheCPU(t *testing.T) {
	open := func(t *testing.T, arch string) (*gguf.File, *model.Model, string) {
		path := modeltest.TinySynth(t, "", arch, quant.Q8_0, 4)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		m, err := model.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		return f, m, path
	}
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			f, m, path := open(t, arch)
			_, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256})
			if !errors.Is(err, engine.ErrGPUDeclined) || !strings.Contains(err.Error(), `"`+arch+`"`) || !strings.Contains(err.Error(), "the CPU serves it") {
				t.Fatalf("err %v, want a decline naming %s and the CPU", err, arch)
			}
			e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, Backend: engine.BackendAuto, Threads: 1, Context: 64, DeviceIndex: -1})
			if err != nil {
				t.Fatalf("auto mode: %v", err)
			}
			defer e.Close()
			if info := e.Info(); info.Backend != "cpu" || !strings.Contains(info.CPUReason, arch) {
				t.Fatalf("auto mode: backend %q, CPU reason %q; want the CPU, saying why", info.Backend, info.CPUReason)
			}
		})
	}
	t.Run("qwen3", func(t *testing.T) {
		_, m, _ := open(t, "qwen3")
		if err := vulkan.CheckModel(m); err != nil {
			t.Fatalf("qwen3: %v, want it accepted", err)
		}
	})
}
