package app

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/store"
)

// scoreEngine answers every test at fixed rates: pp at 1000 t/s with a 100 ms TTFT, tg at 100
// t/s, so a LocalScore run scores 10·cbrt(1000·100·1000/100) = 1000.
type scoreEngine struct{ plans []BenchSettings }

func (e *scoreEngine) Bench(ctx context.Context, s BenchSettings, onProgress func(bench.Progress)) (BenchOutcome, error) {
	e.plans = append(e.plans, s)
	out := BenchOutcome{Target: fakeTarget()}
	step := 0
	for _, r := range []bench.Record{{NPrompt: s.NPrompt, TTFTMs: 100}, {NGen: s.NGen}} {
		n := r.NPrompt + r.NGen
		for rep := 0; rep <= s.Reps; rep++ {
			step++
			onProgress(bench.Progress{Test: r.TestName(), Phase: bench.PhaseRep, Rep: rep, Reps: s.Reps, Step: step, Steps: 2 * (s.Reps + 1)})
		}
		rate := 100.0
		if r.NPrompt > 0 {
			rate = 1000
		}
		r.Summary = bench.Summarize([]int64{int64(float64(n) / rate * 1e9)}, n)
		r.Reps, r.Warmup, r.Tool, r.TestTime = s.Reps, 1, "vkllm", time.Now().UTC().Format(time.RFC3339)
		out.Target.Fill(&r)
		out.Records = append(out.Records, r)
	}
	return out, nil
}

func TestLocalScorePresetRunsTheNineShapesAsOneScoredRun(t *testing.T) {
	st := openBenchStore(t)
	eng := &scoreEngine{}
	rec := &recorder{}
	svc := NewBenchService(context.Background(), eng, st, rec)
	rows, err := svc.Run(BenchSettings{Preset: PresetLocalScore, Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(eng.plans) != 9 || eng.plans[0] != (BenchSettings{NPrompt: 1024, NGen: 16, Reps: 1}) || eng.plans[8] != (BenchSettings{NPrompt: 16, NGen: 1536, Reps: 1}) {
		t.Errorf("engine runs %+v; want LocalScore's nine shapes in order", eng.plans)
	}
	if len(rows) != 18 {
		t.Errorf("%d rows; want a pp and a tg row per shape", len(rows))
	}
	var last BenchEvent
	for _, ev := range rec.benchEvents() {
		if ev.Kind == BenchProgress {
			if ev.Steps != 9*2*2 || ev.Step < last.Step {
				t.Fatalf("progress %d of %d after %d: want one count over the nine shapes (36 steps)", ev.Step, ev.Steps, last.Step)
			}
			last = ev
		}
	}
	groups, err := svc.History(BenchFilter{})
	if err != nil || len(groups) != 1 {
		t.Fatalf("history: %+v, %v", groups, err)
	}
	g := groups[0]
	if g.Runs != 1 || len(g.Rows) != 18 {
		t.Errorf("%d runs of %d rows; want one run of 18 rows", g.Runs, len(g.Rows))
	}
	if len(g.Scores) != 1 || g.Scores[0].Shapes != 9 || math.Abs(g.Scores[0].Score-1000) > 1e-6 {
		t.Errorf("scores %+v; want one LocalScore of 1000 over 9 shapes", g.Scores)
	}
}

func TestHistoryCountsRunsNotRows(t *testing.T) {
	st := openBenchStore(t)
	svc := NewBenchService(context.Background(), &fakeBenchEngine{}, st, &recorder{})
	for range 2 {
		if _, err := svc.Run(BenchSettings{NPrompt: 32, NGen: 16, Reps: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// A row saved before run keys existed counts as a run of its own.
	old := store.BenchRun{Status: store.BenchOK, GPUName: "Fake GPU", Test: "pp32", NPrompt: 32, AvgTS: 10, RunKey: ""}
	if _, err := st.SaveBenchRuns(context.Background(), []store.BenchRun{old}); err != nil {
		t.Fatal(err)
	}
	groups, err := svc.History(BenchFilter{})
	if err != nil || len(groups) != 1 {
		t.Fatalf("history: %+v, %v", groups, err)
	}
	if g := groups[0]; len(g.Rows) != 5 || g.Runs != 3 {
		t.Errorf("%d rows, %d runs; want 5 rows in 3 runs (two clicks of two tests, one older row)", len(g.Rows), g.Runs)
	}
}

func TestNoisyRowsAreFlaggedWithTheReason(t *testing.T) {
	for _, tc := range []struct {
		name      string
		run       store.BenchRun
		wantNoisy bool
	}{
		{"the issue's 3041.91 ± 3193.68", store.BenchRun{Status: store.BenchOK, AvgTS: 3041.91, StddevTS: 3193.68}, true},
		{"6% spread", store.BenchRun{Status: store.BenchOK, AvgTS: 100, StddevTS: 6}, true},
		{"4% spread", store.BenchRun{Status: store.BenchOK, AvgTS: 100, StddevTS: 4}, false},
		{"a cancelled row has no spread to judge", store.BenchRun{Status: store.BenchCancelled, AvgTS: 100, StddevTS: 60}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := benchRow(tc.run)
			if r.Noisy != tc.wantNoisy || (r.Noisy && !strings.Contains(r.NoisyReason, "of the mean")) {
				t.Errorf("noisy %v %q; want %v with the reason", r.Noisy, r.NoisyReason, tc.wantNoisy)
			}
		})
	}
}

func TestExportThenImportAddsNothing(t *testing.T) {
	st := openBenchStore(t)
	svc := NewBenchService(context.Background(), &fakeBenchEngine{}, st, &recorder{})
	if _, err := svc.Run(BenchSettings{NPrompt: 32, NGen: 16, Reps: 2}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, format := range []string{"json", "jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			text, err := svc.Export(ExportRequest{Format: format})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "export."+format)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := svc.Import(path)
			if err != nil || res.Added != 0 || res.Duplicates != 2 {
				t.Errorf("import of our own %s export: %+v, %v; want 0 new, 2 duplicates", format, res, err)
			}
		})
	}
	md, err := svc.Export(ExportRequest{Format: "md"})
	if err != nil || !strings.Contains(md, "| pp32 |") && !strings.Contains(md, " pp32 |") {
		t.Errorf("markdown export: %v\n%s", err, md)
	}
	if _, err := svc.Export(ExportRequest{Format: "xml"}); err == nil || !strings.Contains(err.Error(), "choose csv, json, jsonl or md") {
		t.Errorf("an unknown format: %v", err)
	}
}

// smallContextEngine refuses every test over its context, as the engine's bench.CheckContext does.
type smallContextEngine struct{ scoreEngine }

func (e *smallContextEngine) Bench(ctx context.Context, s BenchSettings, onProgress func(bench.Progress)) (BenchOutcome, error) {
	if err := (bench.Config{NPrompt: s.NPrompt, NGen: s.NGen}).CheckContext(2048); err != nil {
		tg := fakeTarget()
		tg.ModelFile = "" // the row of a test that failed before the engine named the model
		return BenchOutcome{Target: tg}, fmt.Errorf("engine bench: %w", err)
	}
	return e.scoreEngine.Bench(ctx, s, onProgress)
}

func TestLocalScoreOnASmallContextSaysTheContextToLoad(t *testing.T) {
	st := openBenchStore(t)
	svc := NewBenchService(context.Background(), &smallContextEngine{}, st, &recorder{})
	_, err := svc.Run(BenchSettings{Preset: PresetLocalScore, Reps: 1})
	if err == nil || !strings.Contains(err.Error(), "pp4096+tg256 does not fit") || !strings.Contains(err.Error(), "a context of 4096 or more") {
		t.Fatalf("error %v; want the shape that did not fit and the context to load", err)
	}
	groups, err := svc.History(BenchFilter{})
	if err != nil || len(groups) != 1 {
		t.Fatalf("history: %+v, %v", groups, err)
	}
	// The first shape's two rows and the failed one, all one run.
	if g := groups[0]; len(g.Rows) != 3 || g.Runs != 1 || len(g.Scores) != 1 || g.Scores[0].Shapes != 1 || g.Scores[0].Model != "tiny.gguf" {
		t.Errorf("%d rows, %d runs, scores %+v; want 3 rows of one run scored over 1 shape", len(g.Rows), g.Runs, g.Scores)
	}
}
