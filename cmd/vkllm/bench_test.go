package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/store"
)

// captureStdout runs fn with os.Stdout redirected and returns what it printed.
func captureStdout(t *testing.T, fn func() error) (string, error) {
	t.Helper()
	return capture(t, &os.Stdout, fn)
}

// captureStderr runs fn with os.Stderr redirected and returns what it printed there.
func captureStderr(t *testing.T, fn func() error) (string, error) {
	t.Helper()
	return capture(t, &os.Stderr, fn)
}

func capture(t *testing.T, file **os.File, fn func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := *file
	*file = w
	done := make(chan []byte)
	go func() {
		var buf strings.Builder
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			buf.Write(b[:n])
			if err != nil {
				break
			}
		}
		done <- []byte(buf.String())
	}()
	runErr := fn()
	w.Close()
	*file = saved
	return string(<-done), runErr
}

func TestBenchOnTheCPURecordsEveryFieldInHistory(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("VKLLM_DATA_DIR", dir)
	out, err := captureStdout(t, func() error {
		return runBench(context.Background(), []string{"--cpu", "-p", "16", "-n", "8", "-r", "2", "-o", "json"})
	})
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	records, err := bench.ParseLlamaBench(strings.NewReader(out))
	if err != nil {
		t.Fatalf("our JSON does not parse as llama-bench JSON: %v\n%s", err, out)
	}
	if len(records) != 2 || records[0].TestName() != "pp16" || records[1].TestName() != "tg8" {
		t.Fatalf("records: %+v", records)
	}
	for _, r := range records {
		if r.AvgTs <= 0 || len(r.SamplesNs) != 2 || r.ModelParams == 0 || r.ModelSize == 0 || r.Backends != "CPU" || r.Placement != "cpu" {
			t.Errorf("record %s incomplete: %+v", r.TestName(), r)
		}
	}

	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListBenchRuns(context.Background(), store.BenchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("history has %d runs, want 2", len(runs))
	}
	for _, r := range runs {
		checks := map[string]bool{
			"status ok":        r.Status == store.BenchOK,
			"source":           r.Source == "vkllm",
			"hostname":         r.Hostname != "",
			"os":               r.OS != "",
			"cpu":              r.CPU != "",
			"ram":              r.RAMBytes > 0,
			"threads":          r.Threads > 0,
			"engine version":   r.EngineVersion != "",
			"model file":       r.ModelFile != "",
			"model arch":       r.ModelArch == "llama",
			"model quant":      r.ModelQuant != "",
			"model params":     r.ModelParams > 0,
			"model size":       r.ModelSize > 0,
			"context":          r.Context > 0,
			"placement":        r.Placement == "cpu",
			"reps and warm-up": r.Reps == 2 && r.Warmup == 1,
			"samples":          len(r.Samples) == 2 && r.Samples[0].Ns > 0 && r.Samples[0].TokensPerSec > 0,
			"mean":             r.AvgTS > 0 && r.AvgNs > 0,
		}
		for name, ok := range checks {
			if !ok {
				t.Errorf("run %s: %s not filled: %+v", r.Test, name, r)
			}
		}
	}

	// results lists it, exports it as llama-bench JSON, and imports a peer's rows beside it.
	exported, err := captureStdout(t, func() error { return runResults(context.Background(), []string{"-o", "json"}) })
	if err != nil {
		t.Fatalf("results: %v", err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(exported), &rows); err != nil || len(rows) != 2 || rows[0]["avg_ts"] == nil {
		t.Fatalf("results -o json: %v\n%s", err, exported)
	}
	peer := filepath.Join(t.TempDir(), "peer.jsonl")
	line, _ := json.Marshal(bench.Record{ModelType: "llama 260K Q8_0", NPrompt: 16, Summary: bench.Summarize([]int64{1e6, 2e6}, 16), TestTime: "2026-01-02T03:04:05Z"})
	if err := os.WriteFile(peer, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := captureStdout(t, func() error { return runResults(context.Background(), []string{"import", peer}) }); err != nil {
		t.Fatalf("results import: %v", err)
	}
	table, err := captureStdout(t, func() error { return runResults(context.Background(), nil) })
	if err != nil || !strings.Contains(table, "llama-bench") || !strings.Contains(table, "pp16") {
		t.Fatalf("results table lacks the imported row (%v):\n%s", err, table)
	}
}

func TestBenchRefusesBadFlags(t *testing.T) {
	t.Setenv("VKLLM_DATA_DIR", t.TempDir())
	for _, args := range [][]string{{"--gpu", "--cpu"}, {"-r", "0"}, {"-p", "0", "-n", "0"}, {"-o", "yaml"}} {
		if err := runBench(context.Background(), args); !errors.Is(err, errUsage) {
			t.Errorf("bench %v: err = %v, want a usage error", args, err)
		}
	}
	if err := runResults(context.Background(), []string{"import", "/nonexistent/file.json"}); err == nil || !strings.Contains(err.Error(), "/nonexistent/file.json") {
		t.Errorf("import of a missing file: %v", err)
	}
}
