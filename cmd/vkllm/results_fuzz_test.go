package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/store"
)

// FuzzResultsImport imports arbitrary files as llama-bench output into a real store: each import
// adds every row of the file or none (an error that names the file), never panics, and leaves the
// rows it added readable with their samples.
func FuzzResultsImport(f *testing.F) {
	f.Add([]byte(llamaBenchJSONL("/peer/a.gguf", "/peer/b.gguf")))
	f.Add([]byte(`[{"n_prompt":512,"n_gen":0,"n_depth":4096,"avg_ts":1e308,"samples_ns":[1,2,3],"samples_ts":[1]}]`))
	f.Add([]byte(`{"n_prompt":-5,"n_gen":-1,"avg_ns":-9223372036854775808,"test_time":"yesterday","ttft_ms":1e300}` + "\n\n" + `{"n_gen":1,"tool":"vkllm"}`))
	f.Add([]byte(`{"hello":1}`))
	f.Add([]byte("[]"))
	f.Add([]byte(`{"n_gen":1} {"n_gen":2}`))
	f.Add([]byte("\xff\xfe\x00"))
	f.Add([]byte(`{"n_gen":16,"model_filename":"` + strings.Repeat("x", 5000) + `","samples_ns":[` + strings.Repeat("1,", 300) + `1]}`))

	// Each import commits with an fsync (synchronous=FULL); on a memory file system that costs
	// nothing, so the fuzzer tries far more inputs a second.
	dir := f.TempDir()
	if shm, err := os.MkdirTemp("/dev/shm", "vkllm-fuzz-import"); err == nil {
		dir = shm
		f.Cleanup(func() { os.RemoveAll(shm) })
	}
	var st *store.Store
	reopen := func() {
		if st != nil {
			st.Close()
		}
		sub, err := os.MkdirTemp(dir, "store")
		if err != nil {
			f.Fatal(err)
		}
		if st, err = store.Open(sub); err != nil {
			f.Fatal(err)
		}
	}
	reopen()
	f.Cleanup(func() { st.Close() })
	ctx := context.Background()
	rowsNow := func(t *testing.T) []store.BenchRun {
		runs, err := st.ListBenchRuns(ctx, store.BenchFilter{})
		if err != nil {
			t.Fatalf("list the history: %v", err)
		}
		return runs
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(rowsNow(t)) > 200 { // keep each listing cheap
			reopen()
		}
		path := filepath.Join(t.TempDir(), "peer.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		before := len(rowsNow(t))
		res, err := importResults(ctx, st, path)
		n := res.Added
		after := rowsNow(t)
		if err != nil {
			if n != 0 || len(after) != before {
				t.Fatalf("a failed import reported %d rows and left %d rows where there were %d: %v", n, len(after), before, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if len(after) != before+n {
			t.Fatalf("import of %d rows: %d rows in the history, %d before", n, len(after), before)
		}
		for _, r := range after {
			if r.Source == "" || r.Test == "" {
				t.Fatalf("imported row without source or test name: %+v", r)
			}
		}
	})
}
