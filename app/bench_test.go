package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/store"
)

// fakeBenchEngine plays a run: a progress event per step, then the records of the tests that
// finished. With block set it waits after the first test until ctx ends, like a long tg test.
type fakeBenchEngine struct {
	got   BenchSettings
	block bool
	fail  error
	rate  float64 // t/s of every record; 100 when zero
}

func fakeTarget() *bench.Target {
	return &bench.Target{
		Model:     engine.ModelInfo{Name: "tiny.gguf", Path: "/m/tiny.gguf", Arch: "llama", Params: 1e6, FileSize: 1 << 20, Quant: "Q8_0", Context: 64, Backend: "vulkan", Placement: "resident"},
		ModelFile: "/m/tiny.gguf", ModelSHA256: "feed", ModelType: "llama 1M Q8_0", Backend: "Vulkan",
		GPU:     &vulkan.DeviceInfo{Name: "Fake GPU", VendorID: 0x1002, DeviceID: 0x73bf, UUID: "ab", DriverName: "radv", DriverInfo: "25.0", APIVersion: "1.4.0"},
		Machine: store.Machine{Hostname: "box", OS: "linux/amd64", Kernel: "6.12", CPU: "Fake CPU", RAMBytes: 8 << 30}, Threads: 4,
		EngineVersion: "dev", EngineCommit: "c0ffee",
	}
}

func (f *fakeBenchEngine) Bench(ctx context.Context, s BenchSettings, onProgress func(bench.Progress)) (BenchOutcome, error) {
	f.got = s
	tg := fakeTarget()
	rate := f.rate
	if rate == 0 {
		rate = 100
	}
	steps := 2 * (s.Reps + 1)
	step := 0
	var out BenchOutcome
	out.Target = tg
	for _, test := range []bench.Record{{NPrompt: s.NPrompt}, {NGen: s.NGen}} {
		for rep := 0; rep <= s.Reps; rep++ {
			step++
			onProgress(bench.Progress{Test: test.TestName(), Phase: bench.PhaseRep, Rep: rep, Reps: s.Reps, Step: step, Steps: steps, TokensPS: rate})
		}
		n := test.NPrompt + test.NGen
		ns := int64(float64(n) / rate * 1e9)
		test.Summary = bench.Summarize([]int64{ns, ns}, n)
		test.Reps, test.Warmup, test.Tool = s.Reps, 1, "vkllm"
		test.TestTime = time.Now().UTC().Format(time.RFC3339)
		tg.Fill(&test)
		out.Records = append(out.Records, test)
		if f.fail != nil {
			return out, f.fail
		}
		if f.block {
			<-ctx.Done()
			return out, fmt.Errorf("engine bench: tg%d: bench cancelled: %w", s.NGen, context.Canceled)
		}
	}
	return out, nil
}

func openBenchStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func (r *recorder) benchEvents() []BenchEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []BenchEvent
	for _, e := range r.events {
		if b, ok := e.payload.(BenchEvent); ok && e.name == EventBench {
			out = append(out, b)
		}
	}
	return out
}

func TestBenchRunEmitsProgressAndSavesFullRows(t *testing.T) {
	st := openBenchStore(t)
	eng := &fakeBenchEngine{}
	rec := &recorder{}
	svc := NewBenchService(context.Background(), eng, st, rec)
	rows, err := svc.Run(BenchSettings{NPrompt: 32, NGen: 16, Reps: 2})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if eng.got != (BenchSettings{NPrompt: 32, NGen: 16, Reps: 2}) {
		t.Errorf("engine got %+v", eng.got)
	}
	events := rec.benchEvents()
	if len(events) != 7 {
		t.Fatalf("%d bench events, want 6 progress and 1 finished: %+v", len(events), events)
	}
	for i, ev := range events[:6] {
		if ev.Kind != BenchProgress || ev.Step != i+1 || ev.Steps != 6 || ev.AtMs == 0 {
			t.Errorf("progress event %d: %+v", i, ev)
		}
	}
	last := events[6]
	if last.Kind != BenchFinished || len(last.Rows) != 2 || last.Error != "" {
		t.Fatalf("final event %+v", last)
	}
	if len(rows) != 2 || rows[0].Test != "pp32" || rows[1].Test != "tg16" || rows[0].ID == 0 || rows[0].AvgTS != 100 || rows[0].GPUName != "Fake GPU" {
		t.Errorf("rows %+v", rows)
	}
	saved, err := st.ListBenchRuns(context.Background(), store.BenchFilter{})
	if err != nil || len(saved) != 2 {
		t.Fatalf("history: %d runs, %v", len(saved), err)
	}
	for _, r := range saved {
		if r.Status != store.BenchOK || r.GPUKey == "" || r.DriverName != "radv" || r.ModelSHA256 != "feed" || r.Hostname != "box" ||
			r.EngineCommit != "c0ffee" || r.Context != 64 || len(r.Samples) != 2 || r.Reps != 2 || r.Warmup != 1 {
			t.Errorf("saved run lacks context: %+v", r)
		}
	}
}

func TestBenchCancelIsRecordedAsCancelled(t *testing.T) {
	st := openBenchStore(t)
	rec := &recorder{}
	svc := NewBenchService(context.Background(), &fakeBenchEngine{block: true}, st, rec)
	if svc.Cancel() {
		t.Error("Cancel with no run in progress said it cancelled one")
	}
	done := make(chan error, 1)
	go func() {
		_, err := svc.Run(BenchSettings{NPrompt: 32, NGen: 16, Reps: 2})
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !svc.Running() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := svc.Run(BenchSettings{}); err == nil || !strings.Contains(err.Error(), "already in progress") {
		t.Errorf("a second run while one goes: %v, want refused", err)
	}
	if !svc.Cancel() {
		t.Fatal("Cancel found no run in progress")
	}
	if err := <-done; err != nil {
		t.Fatalf("a cancelled run returned %v, want no error", err)
	}
	events := rec.benchEvents()
	last := events[len(events)-1]
	if last.Kind != BenchCancelled || len(last.Rows) != 2 {
		t.Fatalf("final event %+v, want cancelled with the finished pp row and the cancelled tg row", last)
	}
	saved, _ := st.ListBenchRuns(context.Background(), store.BenchFilter{})
	status := map[string]string{}
	for _, r := range saved {
		status[r.Test] = r.Status
	}
	if status["pp32"] != store.BenchOK || status["tg16"] != store.BenchCancelled {
		t.Errorf("history statuses %v, want pp32 ok and tg16 cancelled", status)
	}
	if svc.Running() {
		t.Error("the service still says a run is in progress")
	}
}

// downEngine fails before it starts, as a sidecar that is restarting does.
type downEngine struct{}

func (downEngine) Bench(context.Context, BenchSettings, func(bench.Progress)) (BenchOutcome, error) {
	return BenchOutcome{}, errors.New("engine not running")
}

func TestBenchOnADownEngineIsSavedAsFailedOnThisMachine(t *testing.T) {
	st := openBenchStore(t)
	rec := &recorder{}
	svc := NewBenchService(context.Background(), downEngine{}, st, rec)
	if _, err := svc.Run(BenchSettings{}); err == nil || !strings.Contains(err.Error(), "engine not running") {
		t.Fatalf("Run: %v", err)
	}
	saved, _ := st.ListBenchRuns(context.Background(), store.BenchFilter{})
	if len(saved) != 1 || saved[0].Status != store.BenchFailed || saved[0].Test != "pp512" || saved[0].Hostname == "" || saved[0].CPU == "" && saved[0].OS == "" {
		t.Errorf("history %+v, want one failed pp512 row naming this machine", saved)
	}
}

func TestBenchFailureIsSavedAndReturned(t *testing.T) {
	st := openBenchStore(t)
	rec := &recorder{}
	svc := NewBenchService(context.Background(), &fakeBenchEngine{fail: errors.New("device lost")}, st, rec)
	_, err := svc.Run(BenchSettings{NPrompt: 8, NGen: 8, Reps: 1})
	if err == nil || !strings.Contains(err.Error(), "device lost") {
		t.Fatalf("Run: %v, want the engine's error", err)
	}
	events := rec.benchEvents()
	if last := events[len(events)-1]; last.Kind != BenchFailed || !strings.Contains(last.Error, "device lost") {
		t.Errorf("final event %+v", last)
	}
	saved, _ := st.ListBenchRuns(context.Background(), store.BenchFilter{})
	if len(saved) != 2 || saved[0].Status != store.BenchFailed || saved[0].Test != "tg8" || saved[0].Error == "" {
		t.Errorf("history %+v, want the failed tg8 row on top", saved)
	}
}

func TestBenchSettingsDefaultAndLimits(t *testing.T) {
	for _, tc := range []struct {
		in   BenchSettings
		want BenchSettings
		ok   bool
	}{
		{BenchSettings{}, BenchSettings{512, 128, 5, ""}, true},
		{BenchSettings{NPrompt: 32, NGen: -1, Reps: 2}, BenchSettings{32, 0, 2, ""}, true},
		{BenchSettings{NPrompt: -1, NGen: -1}, BenchSettings{}, false},
		{BenchSettings{Reps: 101}, BenchSettings{}, false},
		{BenchSettings{NPrompt: 1 << 20}, BenchSettings{}, false},
	} {
		got, err := tc.in.normalize()
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("normalize(%+v) = %+v, %v; want %+v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestBenchHistoryGroupsPerGPUWithTheChangeAgainstThePreviousRun(t *testing.T) {
	st := openBenchStore(t)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i, r := range []store.BenchRun{
		{Source: "vkllm", Status: store.BenchOK, GPUName: "Fake GPU", GPUKey: "1002:73bf:ab", ModelFile: "/m/tiny.gguf", Test: "tg16", AvgTS: 100, Decode: "logits"},
		{Source: "llama-bench", Status: store.BenchOK, GPUName: "Fake GPU", ModelFile: "/peer/tiny.gguf", Test: "tg16", AvgTS: 80},
		{Source: "vkllm", Status: store.BenchCancelled, GPUName: "Fake GPU", ModelFile: "/m/tiny.gguf", Test: "tg16"},
		{Source: "vkllm", Status: store.BenchOK, GPUName: "Fake GPU", GPUKey: "1002:73bf:ab", ModelFile: "/m/tiny.gguf", Test: "tg16", AvgTS: 120, Decode: "greedy-chained"},
		{Source: "vkllm", Status: store.BenchOK, GPUName: "Fake GPU", ModelFile: "/m/other.gguf", Test: "tg16", AvgTS: 50},
		{Source: "vkllm", Status: store.BenchOK, Backend: "cpu", CPU: "Fake CPU", ModelFile: "embedded:tiny.gguf", Test: "tg16", AvgTS: 10},
	} {
		r.CreatedAtMs = base + int64(i)*1000
		if _, err := st.SaveBenchRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	svc := NewBenchService(ctx, &fakeBenchEngine{}, st, &recorder{})
	groups, err := svc.History(BenchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Label != "CPU · Fake CPU" || groups[1].Label != "Fake GPU" {
		t.Fatalf("groups %+v, want the CPU group (newest) then Fake GPU", groups)
	}
	gpu := groups[1].Rows
	if len(gpu) != 5 {
		t.Fatalf("%d rows on Fake GPU, want 5 (ours and the peer's)", len(gpu))
	}
	// Newest first: other.gguf (no earlier run), tiny 120 (vs the peer's 80: +50%), cancelled,
	// the peer's 80 (vs our 100: -20%), our first 100 (nothing before).
	wantDelta := []float64{0, 50, 0, -20, 0}
	wantPrev := []string{"", "llama-bench", "", "vkllm", ""}
	for i, r := range gpu {
		got := 0.0
		if r.DeltaPct != nil {
			got = *r.DeltaPct
		}
		if got != wantDelta[i] || r.PrevSource != wantPrev[i] || (wantDelta[i] == 0 && r.DeltaPct != nil) {
			t.Errorf("row %d (%s %s %s %.0f): delta %v from %q, want %v from %q", i, r.Source, r.Model, r.Status, r.AvgTS, got, r.PrevSource, wantDelta[i], wantPrev[i])
		}
	}
	// each row says how its steps ran, and the change says how the previous run's did
	if gpu[1].Decode != "greedy-chained" || gpu[4].Decode != "logits" || gpu[3].PrevDecode != "logits" || gpu[1].PrevDecode != "" {
		t.Errorf("decode: %q, %q; previous %q, %q", gpu[1].Decode, gpu[4].Decode, gpu[3].PrevDecode, gpu[1].PrevDecode)
	}
	if gpu[1].Model != "tiny.gguf" || groups[0].Rows[0].Model != "tiny.gguf" {
		t.Errorf("model names %q, %q, want the base name", gpu[1].Model, groups[0].Rows[0].Model)
	}
	onlyOther, err := svc.History(BenchFilter{Model: "other"})
	if err != nil || len(onlyOther) != 1 || len(onlyOther[0].Rows) != 1 {
		t.Errorf("model filter: %+v, %v", onlyOther, err)
	}
}

func TestBenchImportAddsLlamaBenchRowsBesideOurs(t *testing.T) {
	st := openBenchStore(t)
	svc := NewBenchService(context.Background(), &fakeBenchEngine{}, st, &recorder{})
	if _, err := svc.Run(BenchSettings{NPrompt: 32, NGen: 16, Reps: 2}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "peer.jsonl")
	line := `{"gpu_info":"Fake GPU","backends":"Vulkan","model_filename":"/peer/tiny.gguf","model_type":"llama 1M Q8_0","n_prompt":0,"n_gen":16,"avg_ns":200000000,"avg_ts":80,"stddev_ts":1.5,"samples_ns":[200000000],"samples_ts":[80],"test_time":"2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(jsonl, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Import(jsonl)
	if err != nil || res.Added != 1 || res.Duplicates != 0 {
		t.Fatalf("Import: %+v, %v", res, err)
	}
	groups, err := svc.History(BenchFilter{GPU: "fake"})
	if err != nil || len(groups) != 1 || len(groups[0].Rows) != 3 {
		t.Fatalf("history after import: %+v, %v", groups, err)
	}
	var peer, ours *BenchRow
	for i, r := range groups[0].Rows {
		switch {
		case r.Source == "llama-bench":
			peer = &groups[0].Rows[i]
		case r.Test == "tg16":
			ours = &groups[0].Rows[i]
		}
	}
	if peer == nil || peer.AvgTS != 80 || ours == nil || ours.DeltaPct == nil || *ours.DeltaPct != 25 || ours.PrevSource != "llama-bench" {
		t.Errorf("peer %+v ours %+v, want our tg16 at +25%% over the imported llama-bench row", peer, ours)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"hello":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", filepath.Join(dir, "missing.json"), bad} {
		if res, err := svc.Import(path); err == nil || res.Added != 0 {
			t.Errorf("Import(%q) = %+v, %v; want a clear error", path, res, err)
		} else if path != "" && !strings.Contains(err.Error(), path) {
			t.Errorf("Import(%q) error %q does not name the file", path, err)
		}
	}
}

func TestBenchServiceAnswersOverTheBrowserModeServer(t *testing.T) {
	st := openBenchStore(t)
	hub := NewEventHub()
	ctx := context.Background()
	ws := NewWebServer(fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}}, hub, map[string]any{
		"BenchService": NewBenchService(ctx, &fakeBenchEngine{}, st, hub),
	})
	srv := httptest.NewServer(ws)
	t.Cleanup(func() { hub.closeAll(); srv.Close() })

	code, r := post(t, srv.URL+"/api/BenchService/Run", `[{"nPrompt":32,"nGen":16,"reps":2}]`, nil)
	var rows []BenchRow
	if code != 200 || r.Error != "" || json.Unmarshal(r.Result, &rows) != nil || len(rows) != 2 {
		t.Fatalf("Run: %d %q %s", code, r.Error, r.Result)
	}
	code, r = post(t, srv.URL+"/api/BenchService/History", `[{"gpu":"fake","model":""}]`, nil)
	var groups []BenchGroup
	if code != 200 || r.Error != "" || json.Unmarshal(r.Result, &groups) != nil || len(groups) != 1 || len(groups[0].Rows) != 2 {
		t.Fatalf("History: %d %q %s", code, r.Error, r.Result)
	}
	if !strings.Contains(string(r.Result), `"avgTs":100`) || !strings.Contains(string(r.Result), `"label":"Fake GPU"`) {
		t.Errorf("History JSON lacks the UI's names: %s", r.Result)
	}
	if code, r = post(t, srv.URL+"/api/BenchService/Cancel", `[]`, nil); code != 200 || string(r.Result) != "false" {
		t.Errorf("Cancel with nothing running: %d %s", code, r.Result)
	}
}
