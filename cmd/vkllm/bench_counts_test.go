package main

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A test larger than the model's training context is refused before the model is loaded,
// unless --ctx asks for that context on purpose: -p 1000000000 used to allocate for it and run.
func TestBenchRefusesCountsPastTheTrainingContextBeforeLoading(t *testing.T) {
	t.Setenv("VKLLM_DATA_DIR", t.TempDir())
	for _, args := range [][]string{
		{"-p", "1000000000", "-n", "0"},
		{"-p", "0", "-n", "1000000000"},
		{"-p", "4096", "-n", "0"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			err := runBench(context.Background(), append(args, "--cpu", "--no-save"))
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "the model was trained for 2048") || !strings.Contains(err.Error(), "--ctx") {
				t.Fatalf("bench %v: %v; want a usage error naming the training context and --ctx", args, err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; took > time.Second || alloc > 100<<20 {
				t.Errorf("refusing took %v and allocated %d MB", took, alloc>>20)
			}
		})
	}
}
