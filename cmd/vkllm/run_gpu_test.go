package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/vulkan"
)

// runLogged runs `vkllm run` with args, returning its JSON result's generated ids and the slog
// output.
func runLogged(t *testing.T, args ...string) ([]int, string) {
	t.Helper()
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	out, err := captureStdout(t, func() error {
		return runRun(context.Background(), append([]string{"-p", "Once upon a time", "-n", "8", "--ctx", "256", "--json"}, args...))
	})
	if err != nil {
		t.Fatalf("run %v: %v\n%s", args, err, logs.String())
	}
	var res struct {
		Generated []int `json:"generated"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Generated) == 0 {
		t.Fatalf("run %v: output %q: %v", args, out, err)
	}
	return res.Generated, logs.String()
}

// `vkllm run --gpu` under a generous pin logs the plan's arm line; VKLLM_GPU_RESIDENT=0 logs the
// split line and runs split; both generate the CPU's greedy tokens.
func TestRunGPUPrintsTheArmLineAndTheForcedSplitLine(t *testing.T) {
	if devs, err := vulkan.Devices(); err != nil || len(devs) == 0 {
		t.Skipf("no Vulkan device here (install mesa-vulkan-drivers for lavapipe): %v", err)
	}
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024") // lavapipe's 2 GiB heap leaves nothing after the 2 GiB reserve
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	want, _ := runLogged(t, "--cpu")

	got, logs := runLogged(t, "--gpu")
	if !strings.Contains(logs, "resident driver armed (") {
		t.Errorf("--gpu under a 1024 MiB pin: no arm line in the log:\n%s", logs)
	}
	if !equalIDs(got, want) {
		t.Errorf("--gpu greedy %v, --cpu %v", got, want)
	}

	t.Setenv("VKLLM_GPU_RESIDENT", "0")
	got, logs = runLogged(t, "--gpu")
	if !strings.Contains(logs, `msg="split: 5 of 5 layers on GPU"`) || !strings.Contains(logs, "VKLLM_GPU_RESIDENT=0 forces the partial offload") {
		t.Errorf("--gpu with VKLLM_GPU_RESIDENT=0: no split line or reason in the log:\n%s", logs)
	}
	if !equalIDs(got, want) {
		t.Errorf("forced split greedy %v, --cpu %v", got, want)
	}
}

func equalIDs(a, b []int) bool {
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
