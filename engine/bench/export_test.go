package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/store"
)

// historyRows are two rows as the history holds them: ours with samples, and a peer's.
func historyRows() []store.BenchRun {
	return []store.BenchRun{
		{ID: 1, CreatedAtMs: 1_764_000_000_000, Source: "vkllm", Status: store.BenchOK, Backend: "vulkan", GPUName: "NVIDIA H200",
			CPU: "AMD EPYC 9654", Threads: 16, EngineCommit: "4ac4de5", ModelFile: "/m/llama-8b-Q4_K_M.gguf", ModelType: "llama 8B Q4_K",
			ModelParams: 8e9, ModelSize: 4 << 30, Placement: "resident", Test: "pp512", NPrompt: 512, Reps: 2, Warmup: 1,
			AvgNs: 100_000_000, StddevNs: 1_000_000, AvgTS: 5120.25, StddevTS: 51.5, TTFTNs: 100_500_000,
			Samples: []store.BenchSample{{Rep: 1, Ns: 99_000_000, TokensPerSec: 5171.7}, {Rep: 2, Ns: 101_000_000, TokensPerSec: 5069.3}}},
		{ID: 2, CreatedAtMs: 1_764_000_005_000, Source: "llama-bench", Status: store.BenchOK, Backend: "cuda", GPUName: "NVIDIA H200",
			CPU: "AMD EPYC 9654", Threads: 16, EngineCommit: "b5000", ModelFile: "/m/llama-8b-Q4_K_M.gguf", ModelType: "llama 8B Q4_K - Medium",
			Test: "tg128 @ d4096", NGen: 128, NDepth: 4096, AvgNs: 800_000_000, StddevNs: 2_000_000, AvgTS: 160.5, StddevTS: 0.4},
	}
}

func TestExportedRowsImportAgainAsTheSameRows(t *testing.T) {
	rows := historyRows()
	records := make([]Record, len(rows))
	for i, r := range rows {
		records[i] = RecordOf(r)
	}
	for _, format := range []string{"json", "jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, format, records); err != nil {
				t.Fatal(err)
			}
			back, err := ParseLlamaBench(&buf)
			if err != nil {
				t.Fatalf("our reader refuses our %s export: %v", format, err)
			}
			again := ImportRuns(back)
			if len(again) != len(rows) {
				t.Fatalf("%d rows came back; want %d", len(again), len(rows))
			}
			for i, r := range again {
				if got, want := store.DedupeKey(r), store.DedupeKey(rows[i]); got != want {
					t.Errorf("row %d imports as %q; want the original's identity %q (so a re-import is a duplicate)", i, got, want)
				}
				if r.AvgTS != rows[i].AvgTS || r.StddevTS != rows[i].StddevTS || r.TTFTNs != rows[i].TTFTNs || r.ModelType != rows[i].ModelType || r.NDepth != rows[i].NDepth {
					t.Errorf("row %d: %+v; want the figures of %+v", i, r, rows[i])
				}
				if format != "csv" && len(r.Samples) != len(rows[i].Samples) {
					t.Errorf("row %d: %d samples; want %d", i, len(r.Samples), len(rows[i].Samples))
				}
			}
		})
	}
	t.Run("md", func(t *testing.T) {
		var buf bytes.Buffer
		if err := Write(&buf, "md", records); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2+len(rows) || !strings.HasPrefix(lines[0], "| model") || !strings.Contains(lines[0], " test |") || !strings.Contains(lines[2], "5120.25 ± 51.50") {
			t.Errorf("markdown table:\n%s", buf.String())
		}
		if _, err := ParseLlamaBench(&buf); err == nil {
			t.Error("negative control: the markdown table is for reading, not for import; the reader took it")
		}
	})
}

func TestImportRunsGroupsOneInvocationIntoOneRun(t *testing.T) {
	pp := Record{Tool: "llama-bench", BuildCommit: "b1", GPUInfo: "H200", ModelFile: "a.gguf", NThreads: 8, NPrompt: 512}
	tg := pp
	tg.NPrompt, tg.NGen = 0, 128
	other := pp
	other.ModelFile = "b.gguf"
	runs := ImportRuns([]Record{pp, tg, other})
	if runs[0].RunKey != runs[1].RunKey || runs[0].RunKey == runs[2].RunKey || runs[0].RunKey == "" {
		t.Errorf("run keys %q %q %q: want pp and tg of one model together, the other model apart", runs[0].RunKey, runs[1].RunKey, runs[2].RunKey)
	}
}
