package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/bench"
)

func TestBenchExitsNonZeroWhenItsResultsWereNotSaved(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		dataDir string
		args    []string
		wantErr string // "" = success
	}{
		{"history saved", t.TempDir(), nil, ""},
		{"data dir under a file", filepath.Join(blocker, "data"), nil, "not saved to the history"},
		{"data dir under a file, --no-save", filepath.Join(blocker, "data"), []string{"--no-save"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("VKLLM_DATA_DIR", tc.dataDir)
			args := append([]string{"--cpu", "-p", "8", "-n", "4", "-r", "1", "-o", "json"}, tc.args...)
			out, err := captureStdout(t, func() error { return runBench(context.Background(), args) })
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("bench: %v, want error containing %q", err, tc.wantErr)
			}
			// The results are printed either way.
			if records, perr := bench.ParseLlamaBench(strings.NewReader(out)); perr != nil || len(records) != 2 {
				t.Fatalf("printed results: %d records, %v\n%s", len(records), perr, out)
			}
		})
	}
}
