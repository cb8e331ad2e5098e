package sidecar

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSupervisorUnloadStaysEmptyAcrossARestart: after UnloadModel the engine has no model, a
// restarted engine has none either (not the start-up model), and LoadModel fills it again.
func TestSupervisorUnloadStaysEmptyAcrossARestart(t *testing.T) {
	var log eventLog
	s := startChild(t, &log, "--delay", "1ms")
	ctx := context.Background()
	if _, err := s.LoadModel(ctx, "/models/chosen.gguf"); err != nil {
		t.Fatal(err)
	}
	if err := s.UnloadModel(ctx); err != nil {
		t.Fatalf("UnloadModel: %v", err)
	}
	if info, err := s.Model(ctx); err == nil || !strings.Contains(err.Error(), "no model loaded") {
		t.Fatalf("model after unload: %+v, %v; want none loaded", info, err)
	}
	syscall.Kill(s.PID(), syscall.SIGKILL)
	log.wait(t, EventRestarted, 15*time.Second)
	if info, err := s.Model(ctx); err == nil {
		t.Fatalf("model after a restart of an unloaded engine: %+v; want none loaded", info)
	}
	if info, err := s.LoadModel(ctx, "/models/next.gguf"); err != nil || info.Name != "/models/next.gguf" {
		t.Fatalf("LoadModel after unload: %+v, %v", info, err)
	}
}
