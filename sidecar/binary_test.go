package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// vkllmBinary builds cmd/vkllm once per test run, so the supervisor can run the real `vkllm serve`.
func vkllmBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "vkllm-sidecar-test")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "vkllm")
		out, err := exec.Command("go", "build", "-o", builtBin, "../cmd/vkllm").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build ../cmd/vkllm: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestRealSidecarRecoversFromKillMidStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the vkllm binary")
	}
	bin := vkllmBinary(t)
	dir := t.TempDir()
	t.Setenv("VKLLM_DATA_DIR", dir)
	var log eventLog
	s, err := Start(context.Background(), SupervisorOptions{Binary: bin, Args: []string{"serve", "--cpu"}, DataDir: dir, OnEvent: log.add})
	if err != nil {
		t.Fatalf("Start %s serve: %v", bin, err)
	}
	defer s.Close()
	ctx := context.Background()
	info, err := s.Model(ctx)
	if err != nil || info.Name != "stories260K.gguf" {
		t.Fatalf("Model: %+v, %v; want the embedded model", info, err)
	}
	req := ChatRequest{Messages: []engine.Message{{Role: "user", Content: "Once upon a time"}}, MaxTokens: 40}
	full, err := s.ChatStream(ctx, req, func(string) error { return nil })
	if err != nil || strings.TrimSpace(full.Text) == "" || full.Timings.GeneratedTokens == 0 {
		t.Fatalf("first chat: %+v, %v", full, err)
	}

	pid := s.PID()
	long := req
	long.MaxTokens = 400
	n := 0
	partial, err := s.ChatStream(ctx, long, func(string) error {
		if n++; n == 3 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		return nil
	})
	if !errors.Is(err, ErrEngineDied) {
		t.Fatalf("chat across kill -9: %v (text %q), want ErrEngineDied", err, partial.Text)
	}
	if partial.Text == "" {
		t.Fatal("no partial text kept")
	}
	// Greedy decoding: the partial reply is a prefix of the same prompt's full reply.
	if m := min(len(partial.Text), len(full.Text)); partial.Text[:m] != full.Text[:m] {
		t.Fatalf("partial %q does not continue like the greedy reply %q", partial.Text, full.Text)
	}
	ev := log.wait(t, EventRestarted, 20*time.Second)
	if ev.Reason != "signal: killed" {
		t.Errorf("restart reason %q, want \"signal: killed\"", ev.Reason)
	}
	again, err := s.ChatStream(ctx, req, func(string) error { return nil })
	if err != nil || again.Text != full.Text {
		t.Fatalf("chat after restart: %q, %v; want the same greedy reply %q", again.Text, err, full.Text)
	}

	// The one-click bench goes through the same process.
	np, ng := 8, 4
	events := 0
	recs, err := s.Bench(ctx, BenchRequest{NPrompt: &np, NGen: &ng, Reps: 1}, func(BenchEvent) { events++ })
	if err != nil || len(recs) != 2 || events == 0 {
		t.Fatalf("Bench: %d records, %d events, %v; want pp8 and tg4 with progress", len(recs), events, err)
	}

	// Devices and plan answer in the JSON the CLI prints.
	raw, err := s.Devices(ctx)
	var rep DevicesReport
	if err != nil || json.Unmarshal(raw, &rep) != nil || (len(rep.Vulkan) == 0 && rep.VulkanError == "") {
		t.Fatalf("Devices: %s, %v", raw, err)
	}
	raw, err = s.Plan(ctx, PlanRequest{VRAMMB: 300})
	if len(rep.Vulkan) == 0 {
		if err == nil {
			t.Fatalf("Plan without a Vulkan device answered %s", raw)
		}
		return
	}
	var p struct {
		Verdict struct{ Text string } `json:"verdict"`
	}
	if err != nil || json.Unmarshal(raw, &p) != nil || p.Verdict.Text == "" {
		t.Fatalf("Plan: %s, %v", raw, err)
	}
}
