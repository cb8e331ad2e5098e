package backend

import (
	"context"
	"errors"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

const moeDecline = "the Vulkan driver does not run qwen3moe's mixture-of-experts layers yet; the CPU serves"

func writeMoE(t *testing.T) string {
	t.Helper()
	path := modeltest.TinySynth(t, "", "qwen3moe", quant.Q8_0, 4)
	return path
}

// The decline comes before any device is looked at, so it holds on machines with and without
// Vulkan alike.
func TestMixtureOfExpertsIsDeclinedWithItsReason(t *testing.T) {
	path := writeMoE(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: 256})
	if !errors.Is(err, engine.ErrGPUDeclined) || !strings.HasSuffix(err.Error(), ": "+moeDecline) {
		t.Fatalf("err %v, want a decline saying %q", err, moeDecline)
	}
	if _, dense := DeclineMoE(&model.Model{Hyper: model.Hyperparameters{Arch: "qwen3"}}); dense {
		t.Fatal("a dense model was declined as a mixture of experts")
	}
}

func TestMixtureOfExpertsServesOnTheCPUOrFailsUnderGPU(t *testing.T) {
	path := writeMoE(t)
	e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, Backend: engine.BackendAuto, Threads: 2, Context: 256})
	if err != nil {
		t.Fatalf("auto mode: %v", err)
	}
	info := e.Info()
	e.Close()
	if info.Backend != "cpu" || !strings.Contains(info.CPUReason, moeDecline) {
		t.Fatalf("auto mode: backend %q, reason %q; want the CPU with %q", info.Backend, info.CPUReason, moeDecline)
	}
	_, err = engine.Load(context.Background(), engine.LoadOptions{Path: path, Backend: engine.BackendGPU, Threads: 2, Context: 256})
	if err == nil || !strings.Contains(err.Error(), moeDecline) {
		t.Fatalf("--gpu: err %v, want it to say %q", err, moeDecline)
	}
}
