package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/store"
)

func TestBenchAtDepthOnTheCPUReachesOutputAndHistory(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("VKLLM_DATA_DIR", dir)
	var out string
	stderr, err := captureStderr(t, func() error {
		var err error
		out, err = captureStdout(t, func() error {
			return runBench(context.Background(), []string{"--cpu", "-p", "8", "-n", "4", "-r", "1", "-d", "0,32", "-o", "json"})
		})
		return err
	})
	if err != nil {
		t.Fatalf("bench -d 0,32: %v\n%s", err, stderr)
	}
	if !regexp.MustCompile(`(?m)^load: [0-9.]+ MB in [0-9]+ ms \([0-9.]+ GB/s\) to cpu`).MatchString(stderr) {
		t.Errorf("stderr lacks the load line:\n%s", stderr)
	}
	records, err := bench.ParseLlamaBench(strings.NewReader(out))
	if err != nil {
		t.Fatalf("bench output: %v\n%s", err, out)
	}
	var names []string
	for _, r := range records {
		names = append(names, fmt.Sprintf("%s/%d", r.TestName(), r.NDepth))
		if r.LoadMs <= 0 || r.LoadGBps <= 0 {
			t.Errorf("%s: load %.3f ms %.3f GB/s, want both measured", r.TestName(), r.LoadMs, r.LoadGBps)
		}
	}
	if fmt.Sprint(names) != "[pp8/0 tg4/0 pp8 @ d32/32 tg4 @ d32/32]" {
		t.Fatalf("records %v", names)
	}

	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.ListBenchRuns(context.Background(), store.BenchFilter{})
	st.Close()
	if err != nil || len(runs) != 4 {
		t.Fatalf("history: %d runs, %v", len(runs), err)
	}
	for _, r := range runs {
		wantDepth := 0
		if strings.HasSuffix(r.Test, "@ d32") {
			wantDepth = 32
		}
		if r.NDepth != wantDepth || r.LoadNs <= 0 || r.Context < 32+8 {
			t.Errorf("history row %s: depth %d load %d ns context %d", r.Test, r.NDepth, r.LoadNs, r.Context)
		}
		// the CPU reads each step's logits back; pp rows have no decode mode
		if wantDecode := map[bool]string{true: bench.DecodeLogits, false: ""}[r.NGen > 0]; r.Decode != wantDecode {
			t.Errorf("history row %s: decode %q, want %q", r.Test, r.Decode, wantDecode)
		}
	}
	table, err := captureStdout(t, func() error { return runResults(context.Background(), nil) })
	if err != nil || !strings.Contains(table, "tg4 @ d32") || !strings.Contains(table, "decode") || strings.Count(table, " logits ") != 2 {
		t.Errorf("results table lacks the depth test or the tg rows' decode mode (%v):\n%s", err, table)
	}
	exported, err := captureStdout(t, func() error { return runResults(context.Background(), []string{"-o", "jsonl"}) })
	if err != nil || strings.Count(exported, `"n_depth":32`) != 2 || !strings.Contains(exported, `"load_gbps":`) || strings.Count(exported, `"decode":"logits"`) != 2 {
		t.Errorf("results -o jsonl does not carry n_depth, load_gbps and decode (%v):\n%s", err, exported)
	}
}

func TestBenchRefusesAContextTooSmallForTheDepthBeforeLoading(t *testing.T) {
	t.Setenv("VKLLM_DATA_DIR", t.TempDir())
	// The model path does not exist: the context error must come first, before anything is opened.
	err := runBench(context.Background(), []string{"--cpu", "-m", "/nonexistent/model.gguf", "-p", "512", "-n", "128", "-d", "0,4096", "--ctx", "4096"})
	if !errors.Is(err, errUsage) {
		t.Fatalf("err = %v, want a usage error", err)
	}
	for _, want := range []string{"pp512 @ d4096", "4608", "--ctx 4096", "raise --ctx to 4608"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "nonexistent") {
		t.Errorf("the model was opened before the context check: %v", err)
	}
	for _, bad := range []string{"-1", "4k", "0,,8", ""} {
		if err := runBench(context.Background(), []string{"--cpu", "-d", bad}); err == nil || !strings.Contains(err.Error(), "token count") {
			t.Errorf("-d %q: %v, want a token-count error", bad, err)
		}
	}
}

// A fake llama-bench records its arguments and answers with one row per depth it was given.
func TestBenchRefPassesTheDepthToLlamaBench(t *testing.T) {
	t.Setenv("VKLLM_DATA_DIR", t.TempDir())
	tmp := t.TempDir()
	argsFile := filepath.Join(tmp, "args")
	rows, _ := json.Marshal([]bench.Record{
		{NPrompt: 8, Summary: bench.Summarize([]int64{1e6}, 8)}, {NGen: 4, Summary: bench.Summarize([]int64{1e6}, 4)},
		{NPrompt: 8, NDepth: 32, Summary: bench.Summarize([]int64{2e6}, 8)}, {NGen: 4, NDepth: 32, Summary: bench.Summarize([]int64{2e6}, 4)},
	})
	script := fmt.Sprintf("#!/bin/sh\necho \"$@\" > %s\ncat <<'EOF'\n%s\nEOF\n", argsFile, rows)
	ref := filepath.Join(tmp, "llama-bench")
	if err := os.WriteFile(ref, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(tmp, "m.gguf")
	if err := runSynth(context.Background(), []string{"-o", model}); err != nil {
		t.Fatalf("synth: %v", err)
	}
	out, err := captureStdout(t, func() error {
		return runBench(context.Background(), []string{"--cpu", "-m", model, "-p", "8", "-n", "4", "-r", "1", "-d", "0,32", "--ref", ref})
	})
	if err != nil {
		t.Fatalf("bench --ref: %v\n%s", err, out)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil || !strings.Contains(string(args), "-d 0,32") || !strings.Contains(string(args), "-p 8 -n 4 -r 1") {
		t.Errorf("llama-bench got %q (%v), want -p 8 -n 4 -r 1 ... -d 0,32", args, err)
	}
	for _, want := range []string{"tg4 @ d32: vkllm", "pp8 @ d32: vkllm", "tg4: vkllm"} {
		if !strings.Contains(out, want) {
			t.Errorf("ratios lack %q:\n%s", want, out)
		}
	}
}

func TestResultsCompareTablesOurFileBesideAPeerFile(t *testing.T) {
	dir := t.TempDir()
	ours, peer := filepath.Join(dir, "ours.json"), filepath.Join(dir, "peer.jsonl")
	fa1 := bench.FlashAttn(1)
	o, _ := json.Marshal([]bench.Record{{Tool: "vkllm", ModelFile: "/a/m.gguf", ModelType: "llama 1B Q4_0", NGen: 128, NDepth: 4096, Summary: bench.Summarize([]int64{1e9}, 128)}})
	p, _ := json.Marshal(bench.Record{ModelFile: "m.gguf", NGen: 128, NDepth: 4096, FlashAttn: &fa1, Summary: bench.Summarize([]int64{5e8}, 128)})
	if os.WriteFile(ours, o, 0o644) != nil || os.WriteFile(peer, append(p, '\n'), 0o644) != nil {
		t.Fatal("write inputs")
	}
	out, err := captureStdout(t, func() error { return runResults(context.Background(), []string{"compare", ours, peer}) })
	if err != nil || !strings.Contains(out, "| llama 1B Q4_0 | tg128 @ d4096 | 128.00 ± 0.00 | 256.00 ± 0.00 | 0.50x | 0.50x |") {
		t.Errorf("results compare (%v):\n%s", err, out)
	}
	if err := runResults(context.Background(), []string{"compare"}); !errors.Is(err, errUsage) {
		t.Errorf("compare without files: %v, want a usage error", err)
	}
	if err := runResults(context.Background(), []string{"compare", filepath.Join(dir, "missing.json")}); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("compare of a missing file: %v", err)
	}
}
