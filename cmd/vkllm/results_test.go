package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/vkllm/vkllm/store"
)

// llamaBenchJSONL is llama-bench -o jsonl output with one row per model file.
func llamaBenchJSONL(models ...string) string {
	var b strings.Builder
	for i, m := range models {
		fmt.Fprintf(&b, `{"gpu_info":"Peer GPU","backends":"Vulkan","model_filename":%q,"model_type":"llama 1M Q8_0","n_prompt":0,"n_gen":16,"avg_ns":200000000,"avg_ts":%d,"stddev_ts":1.5,"samples_ns":[200000000],"samples_ts":[80],"test_time":"2026-01-01T00:00:00Z"}`+"\n", m, 80+i)
	}
	return b.String()
}

// failInsertsOf makes every insert of a bench row for model fail with message, through a
// trigger in the database file itself, as a full disk or a kill would fail it midway.
func failInsertsOf(t *testing.T, dbPath, model, message string) {
	t.Helper()
	db, err := sql.Open("sqlite3", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := fmt.Sprintf(`CREATE TRIGGER inject_failure BEFORE INSERT ON bench_runs WHEN NEW.model_file = '%s'
		BEGIN SELECT RAISE(ABORT, '%s'); END`, model, message)
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("install the failing trigger: %v", err)
	}
}

func TestResultsImportSavesTheWholeFileOrNothing(t *testing.T) {
	const cause = "injected failure: database or disk is full"
	for _, tc := range []struct {
		name     string
		failAt   string // the model whose row fails to insert; "" = none
		wantRows int
	}{
		{"every row saves", "", 3},
		{"the second row fails", "/peer/b.gguf", 0},
		{"the last row fails", "/peer/c.gguf", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("VKLLM_DATA_DIR", dir)
			st, err := store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			dbPath := st.Path()
			st.Close()
			if tc.failAt != "" {
				failInsertsOf(t, dbPath, tc.failAt, cause)
			}
			file := filepath.Join(t.TempDir(), "peer.jsonl")
			if err := os.WriteFile(file, []byte(llamaBenchJSONL("/peer/a.gguf", "/peer/b.gguf", "/peer/c.gguf")), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := captureStdout(t, func() error { return runResults(context.Background(), []string{"import", file}) })
			if tc.failAt == "" {
				if err != nil || !strings.Contains(out, "imported 3 new llama-bench row(s)") || !strings.Contains(out, "0 already in the history") {
					t.Fatalf("import: %v, output %q", err, out)
				}
				// The same file again adds nothing and says so.
				out, err = captureStdout(t, func() error { return runResults(context.Background(), []string{"import", file}) })
				if err != nil || !strings.Contains(out, "imported 0 new llama-bench row(s)") || !strings.Contains(out, "3 already in the history (duplicates)") {
					t.Fatalf("second import: %v, output %q", err, out)
				}
			} else {
				if err == nil {
					t.Fatalf("import succeeded though the row of %s could not be inserted", tc.failAt)
				}
				for _, want := range []string{file, "none of its 3 row(s) were saved", cause} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
			}
			st, err = store.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			runs, err := st.ListBenchRuns(context.Background(), store.BenchFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != tc.wantRows {
				t.Fatalf("%d rows in the history after the import, want %d (all or none)", len(runs), tc.wantRows)
			}
			for _, r := range runs {
				if len(r.Samples) != 1 || r.Source != "llama-bench" {
					t.Errorf("row %s of %s: source %q, %d samples", r.Test, r.ModelFile, r.Source, len(r.Samples))
				}
			}
		})
	}
}
