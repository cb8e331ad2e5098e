package backend

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// Under a generous pin a mixture-of-experts model arms resident on the Vulkan driver in auto
// mode (the arm line names its experts) and continues a prompt with the CPU's greedy tokens.
func TestMixtureOfExpertsArmsResident(t *testing.T) {
	vulkanOrSkip(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024")
	for _, arch := range []string{"qwen3moe", "qwen2moe"} {
		t.Run(arch, func(t *testing.T) {
			path := modeltest.TinySynth(t, "", arch, quant.Q8_0, 4)
			greedy := func(backend engine.Backend) ([]int, engine.ModelInfo) {
				e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, Backend: backend, Threads: 1, Context: 64, DeviceIndex: -1})
				if err != nil {
					t.Fatalf("%v: %v", backend, err)
				}
				defer e.Close()
				r := e.Runner()
				logits, err := r.Eval([]int{1, 262, 300, 275}, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				var out []int
				for i := 0; i < 4; i++ {
					best := 0
					for j, v := range logits {
						if v > logits[best] {
							best = j
						}
					}
					out = append(out, best)
					if logits, err = r.Eval([]int{best}, 4+i, false); err != nil {
						t.Fatal(err)
					}
				}
				return out, e.Info()
			}
			want, _ := greedy(engine.BackendCPU)
			got, info := greedy(engine.BackendAuto)
			if info.Backend != "vulkan" || info.Placement != "resident" {
				t.Fatalf("auto mode: backend %q placement %q (reason %q), want vulkan resident", info.Backend, info.Placement, info.CPUReason)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("resident greedy %v, cpu %v", got, want)
			}
		})
	}
}

// A mixture-of-experts model whose experts are of a type the Vulkan kernels do not read is
// declined before any device is looked at, naming the expert tensor, its type and the types
// supported; a dense model of a supported type passes the same check.
func TestMixtureOfExpertsOfAnUnsupportedTypeIsDeclinedNamingTheTensor(t *testing.T) {
	m := modeltest.Load(t, modeltest.TinySynth(t, "", "qwen3moe", quant.Q8_0, 4))
	// every type the writer produces has kernels now: Q8_K (an activation type a GGUF can still
	// name) stands for one without; the check reads the types, so the bytes never matter
	m.Layers[0].MoE.Gate.Type = quant.Q8_K
	_, err := New(context.Background(), m.File, m, engine.LoadOptions{DeviceIndex: -1, Context: 256})
	want := `tensor "blk.0.ffn_gate_exps.weight" of type Q8_K`
	if !errors.Is(err, engine.ErrGPUDeclined) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "IQ4_XS") || !strings.Contains(err.Error(), "Q2_K") {
		t.Fatalf("err %v, want a decline naming %s and the supported types", err, want)
	}
}
