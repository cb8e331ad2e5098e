package store

import (
	"context"
	"testing"
)

func importRow(test string, avgNs int64, atMs int64) BenchRun {
	return BenchRun{Source: "llama-bench", Status: BenchOK, GPUName: "NVIDIA H200", CPU: "EPYC", ModelFile: "/m/a.gguf",
		Test: test, NPrompt: 512, AvgNs: avgNs, StddevNs: 1000, AvgTS: 5000, CreatedAtMs: atMs,
		Samples: []BenchSample{{Rep: 1, Ns: avgNs, TokensPerSec: 5000}}}
}

func TestImportBenchRunsSkipsRowsTheHistoryHolds(t *testing.T) {
	ctx := context.Background()
	file := []BenchRun{importRow("pp512", 100e6, 1_700_000_000_000), importRow("tg128", 200e6, 1_700_000_001_000)}
	for _, tc := range []struct {
		name           string
		rows           []BenchRun
		added, dupes   int
		totalAfterward int
	}{
		{"the first import adds every row", file, 2, 0, 2},
		{"the same file again adds nothing", file, 0, 2, 2},
		{"the same rows a millisecond off (exported at second resolution) are duplicates", []BenchRun{importRow("pp512", 100e6, 1_700_000_000_999)}, 0, 1, 2},
		{"a row repeated within one file counts once", []BenchRun{importRow("pp512", 101e6, 1_700_000_002_000), importRow("pp512", 101e6, 1_700_000_002_000)}, 1, 1, 3},
		{"negative control: another timing is a new row", []BenchRun{importRow("pp512", 102e6, 1_700_000_000_000)}, 1, 0, 4},
		{"negative control: another GPU is a new row", []BenchRun{func() BenchRun { r := importRow("pp512", 100e6, 1_700_000_000_000); r.GPUName = "RTX 4090"; return r }()}, 1, 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sharedImportStore(t)
			res, err := st.ImportBenchRuns(ctx, tc.rows)
			if err != nil {
				t.Fatal(err)
			}
			if res.Added != tc.added || res.Duplicates != tc.dupes || len(res.IDs) != tc.added {
				t.Errorf("import: %+v; want %d added, %d duplicates", res, tc.added, tc.dupes)
			}
			all, err := st.ListBenchRuns(ctx, BenchFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != tc.totalAfterward {
				t.Errorf("history holds %d rows; want %d", len(all), tc.totalAfterward)
			}
		})
	}
}

var importStore *Store

// sharedImportStore is one history for the import cases, which build on each other in order.
func sharedImportStore(t *testing.T) *Store {
	if importStore == nil {
		s, err := Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		importStore = s
	}
	return importStore
}

func TestSaveBenchRunsGivesOneRunKeyPerBatch(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.SaveBenchRuns(ctx, []BenchRun{importRow("pp512", 1, 1000), importRow("tg128", 2, 2000)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveBenchRuns(ctx, []BenchRun{importRow("pp512", 3, 3000)}); err != nil {
		t.Fatal(err)
	}
	kept := importRow("tg128", 4, 4000)
	kept.RunKey = "given"
	if _, err := s.SaveBenchRuns(ctx, []BenchRun{kept}); err != nil {
		t.Fatal(err)
	}
	runs, err := s.ListBenchRuns(ctx, BenchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, r := range runs {
		if r.RunKey == "" {
			t.Errorf("row %d has no run key", r.ID)
		}
		keys[r.RunKey]++
	}
	if len(keys) != 3 || keys["given"] != 1 {
		t.Errorf("run keys %v: want 3 runs (two rows, one row, and the given key)", keys)
	}
}
