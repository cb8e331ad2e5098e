package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/store"
)

// BenchSettings is one click's test plan: llama-bench's -p, -n and -r. Zero fields take
// llama-bench's defaults (pp512, tg128, 5 repetitions); -1 for NPrompt or NGen skips that test.
type BenchSettings struct {
	NPrompt int `json:"nPrompt"`
	NGen    int `json:"nGen"`
	Reps    int `json:"reps"`
	// Preset "localscore" runs LocalScore's nine shapes (bench.LocalScoreShapes) as one run,
	// each as its pp and tg test, with Reps repetitions; NPrompt and NGen are then ignored.
	Preset string `json:"preset,omitempty"`
}

// PresetLocalScore is the BenchSettings.Preset of LocalScore's test plan.
const PresetLocalScore = "localscore"

// Bench settings limits: what one click may ask of the engine.
const (
	maxBenchTokens = 16384
	maxBenchReps   = 100
)

// DefaultBenchSettings is llama-bench's default run: pp512 and tg128, five repetitions each.
var DefaultBenchSettings = BenchSettings{NPrompt: 512, NGen: 128, Reps: 5}

// plans is the engine runs one click makes: the settings themselves, or for the LocalScore preset
// one run of each of its shapes.
func (b BenchSettings) plans() []BenchSettings {
	if b.Preset != PresetLocalScore {
		return []BenchSettings{b}
	}
	plans := make([]BenchSettings, len(bench.LocalScoreShapes))
	for i, shape := range bench.LocalScoreShapes {
		plans[i] = BenchSettings{NPrompt: shape.NPrompt, NGen: shape.NGen, Reps: b.Reps}
	}
	return plans
}

// steps is how many progress steps a plan takes: a warm-up and the repetitions per test.
func (b BenchSettings) steps() int {
	tests := 0
	if b.NPrompt > 0 {
		tests++
	}
	if b.NGen > 0 {
		tests++
	}
	return tests * (1 + b.Reps)
}

// normalize applies the defaults and checks the limits.
func (b BenchSettings) normalize() (BenchSettings, error) {
	switch b.Preset {
	case "", PresetLocalScore:
	default:
		return b, fmt.Errorf("benchmark: unknown preset %q; choose %q or none", b.Preset, PresetLocalScore)
	}
	if b.Preset == PresetLocalScore {
		b.NPrompt, b.NGen = 1, 1 // the shapes replace them; keep the checks below quiet
	}
	if b.NPrompt == 0 {
		b.NPrompt = DefaultBenchSettings.NPrompt
	}
	if b.NGen == 0 {
		b.NGen = DefaultBenchSettings.NGen
	}
	if b.Reps == 0 {
		b.Reps = DefaultBenchSettings.Reps
	}
	b.NPrompt, b.NGen = max(b.NPrompt, 0), max(b.NGen, 0)
	switch {
	case b.NPrompt+b.NGen == 0:
		return b, errors.New("benchmark: both tests are off; give a prompt size or a generation length")
	case b.NPrompt > maxBenchTokens || b.NGen > maxBenchTokens:
		return b, fmt.Errorf("benchmark: pp%d/tg%d is over the %d-token limit of one run; choose smaller sizes", b.NPrompt, b.NGen, maxBenchTokens)
	case b.Reps < 1 || b.Reps > maxBenchReps:
		return b, fmt.Errorf("benchmark: %d repetitions; choose 1 to %d", b.Reps, maxBenchReps)
	}
	return b, nil
}

// BenchOutcome is what the engine sends back from a run: the records (filled from the target) and
// the target itself, which bench.HistoryRuns needs to write the full rows.
type BenchOutcome struct {
	Records []bench.Record
	Target  *bench.Target // nil when the engine failed before describing it
}

// BenchEngine runs the llama-bench-style tests on the loaded model. The sidecar supervisor
// satisfies it through main.go's adapter. Cancelling ctx stops the run; the outcome holds what
// finished by then, and the error says it was cancelled.
type BenchEngine interface {
	Bench(ctx context.Context, settings BenchSettings, onProgress func(bench.Progress)) (BenchOutcome, error)
}

// BenchStore keeps the bench history; *store.Store satisfies it. The app is the history's one
// writer for runs started in the window: the engine process only measures.
type BenchStore interface {
	// SaveBenchRuns saves the rows of one run or one import in one transaction: all or none.
	SaveBenchRuns(ctx context.Context, runs []store.BenchRun) ([]int64, error)
	ListBenchRuns(ctx context.Context, f store.BenchFilter) ([]store.BenchRun, error)
	// ImportBenchRuns saves the rows the history does not already hold, in one transaction.
	ImportBenchRuns(ctx context.Context, runs []store.BenchRun) (store.ImportResult, error)
}

// Kinds of bench:event.
const (
	BenchProgress  = "progress"
	BenchFinished  = "finished"
	BenchFailed    = "failed"
	BenchCancelled = "cancelled"
)

// BenchEvent is the payload of bench:event: progress while a run goes, then finished, failed or
// cancelled with the rows it saved.
type BenchEvent struct {
	Kind         string     `json:"kind"`
	Test         string     `json:"test,omitempty"`  // "pp512"
	Phase        string     `json:"phase,omitempty"` // warmup | rep | done
	Rep          int        `json:"rep"`
	Reps         int        `json:"reps"`
	Step         int        `json:"step"`
	Steps        int        `json:"steps"`
	TokensPerSec float64    `json:"tokensPerSec,omitempty"`
	Rows         []BenchRow `json:"rows,omitempty"`
	Error        string     `json:"error,omitempty"`
	AtMs         int64      `json:"atMs"`
}

// BenchRow is one history row as the Benchmark tab shows it.
type BenchRow struct {
	ID          int64   `json:"id"`
	CreatedAtMs int64   `json:"createdAtMs"`
	Source      string  `json:"source"` // "vkllm" or "llama-bench"
	Status      string  `json:"status"` // ok | failed | cancelled
	Error       string  `json:"error,omitempty"`
	GPUKey      string  `json:"gpuKey"`
	GPUName     string  `json:"gpuName"`
	Backend     string  `json:"backend"`
	Model       string  `json:"model"` // the file's base name
	ModelFile   string  `json:"modelFile"`
	ModelType   string  `json:"modelType"`
	Test        string  `json:"test"`
	Reps        int     `json:"reps"`
	AvgTS       float64 `json:"avgTs"`
	StddevTS    float64 `json:"stddevTs"`
	TTFTMs      float64 `json:"ttftMs"`
	Placement   string  `json:"placement"`
	RunKey      string  `json:"runKey"` // the run the row belongs to (one click, one import invocation)
	CPU         string  `json:"cpu"`
	Quant       string  `json:"quant"` // the model's quantization: the file's own word, or model_type's last one
	NPrompt     int     `json:"nPrompt"`
	NGen        int     `json:"nGen"`
	NDepth      int     `json:"nDepth"`
	Commit      string  `json:"commit"`
	// Decode is how a tg row's steps ran ("logits", "greedy", "greedy-chained"; "" for pp rows,
	// imported rows and rows from before it was recorded).
	Decode string `json:"decode,omitempty"`
	// Samples are the repetitions' t/s.
	Samples []float64 `json:"samples"`
	// Noisy flags a spread over 5% of the mean; NoisyReason says so in a sentence.
	Noisy       bool   `json:"noisy"`
	NoisyReason string `json:"noisyReason,omitempty"`
	// The previous ok run of the same model and test on the same GPU, when there is one.
	PrevID     int64    `json:"prevId,omitempty"`
	PrevSource string   `json:"prevSource,omitempty"`
	PrevTS     float64  `json:"prevTs,omitempty"`
	PrevDecode string   `json:"prevDecode,omitempty"` // how the previous run's steps ran, where it says
	DeltaPct   *float64 `json:"deltaPct,omitempty"`
}

// BenchGroup is every row on one GPU (or, for CPU runs, one CPU), newest first.
type BenchGroup struct {
	Key   string     `json:"key"`
	Label string     `json:"label"`
	Kind  string     `json:"kind"` // gpu | cpu
	Rows  []BenchRow `json:"rows"`
	Runs  int        `json:"runs"` // runs, not rows: the rows of one click or one invocation are one run
	// Scores are the LocalScores of the group's runs that measured LocalScore's shapes, newest
	// first.
	Scores []RunScore `json:"scores"`
}

// RunScore is one run's LocalScore.
type RunScore struct {
	RunKey      string `json:"runKey"`
	Model       string `json:"model"`
	CreatedAtMs int64  `json:"createdAtMs"`
	bench.LocalScoreSummary
}

// BenchFilter narrows History: GPU matches a GPU name substring or key, Model a model file
// substring or sha256 prefix; empty matches all.
type BenchFilter struct {
	GPU   string `json:"gpu"`
	Model string `json:"model"`
}

// BenchService is the one-click benchmark: it runs the engine's bench on the loaded model,
// streams progress as bench:event, saves every run (failed and cancelled ones as such) and lists
// the history per GPU.
type BenchService struct {
	ctx    context.Context
	engine BenchEngine
	store  BenchStore
	emit   Emitter

	mu        sync.Mutex
	cancel    context.CancelFunc // of the run in progress; nil when idle
	cancelled bool               // Cancel was called for the run in progress
}

// NewBenchService returns the bench service.
func NewBenchService(ctx context.Context, eng BenchEngine, st BenchStore, em Emitter) *BenchService {
	return &BenchService{ctx: ctx, engine: eng, store: st, emit: em}
}

// Defaults returns llama-bench's default settings (pp512, tg128, 5 repetitions).
func (s *BenchService) Defaults() BenchSettings { return DefaultBenchSettings }

// Running tells whether a run is in progress.
func (s *BenchService) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancel != nil
}

// Run benchmarks the loaded model with settings, emitting progress, and returns the rows it saved
// once the run ends. A failed or cancelled run is saved and announced as such; only a cancelled
// run returns no error.
func (s *BenchService) Run(settings BenchSettings) ([]BenchRow, error) {
	settings, err := settings.normalize()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.cancel != nil {
		s.mu.Unlock()
		return nil, errors.New("benchmark: a run is already in progress; wait for it or cancel it")
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.cancel, s.cancelled = cancel, false
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancel = nil
		s.mu.Unlock()
		cancel()
	}()

	plans := settings.plans()
	total := 0
	for _, p := range plans {
		total += p.steps()
	}
	runKey := store.NewRunKey()
	var runs []store.BenchRun
	var runErr error
	done := 0
	for _, plan := range plans {
		started := time.Now()
		var out BenchOutcome
		out, runErr = s.engine.Bench(ctx, plan, func(p bench.Progress) {
			step, steps := p.Step, p.Steps
			if len(plans) > 1 {
				step, steps = done+p.Step, total
			}
			s.emit.Emit(EventBench, BenchEvent{Kind: BenchProgress, Test: p.Test, Phase: string(p.Phase), Rep: p.Rep, Reps: p.Reps,
				Step: step, Steps: steps, TokensPerSec: p.TokensPS, AtMs: nowMs()})
		})
		runErr = s.noteCancel(runErr)
		if runErr != nil && len(plans) > 1 && strings.Contains(runErr.Error(), "positions of context") {
			runErr = &localScoreContextError{shape: fmt.Sprintf("pp%d+tg%d", plan.NPrompt, plan.NGen), err: runErr}
		}
		runs = append(runs, s.historyRuns(out, plan, runErr, started)...)
		done += plan.steps()
		if runErr != nil {
			break
		}
	}
	for i := range runs {
		runs[i].RunKey = runKey
	}
	return s.save(runs, runErr)
}

// localScoreContextError says in the app's words (no CLI flag) that a LocalScore shape does not
// fit the loaded context, and which context runs them all; the engine's error stays wrapped.
type localScoreContextError struct {
	shape string
	err   error
}

func (e *localScoreContextError) Error() string {
	return fmt.Sprintf("LocalScore's %s does not fit the loaded context; load the model with a context of %d or more in Load options to run all nine shapes",
		e.shape, localScoreContext())
}

func (e *localScoreContextError) Unwrap() error { return e.err }

// localScoreContext is the context LocalScore's largest test needs.
func localScoreContext() int {
	n := 0
	for _, shape := range bench.LocalScoreShapes {
		n = max(n, shape.NPrompt, shape.NGen)
	}
	return n
}

// noteCancel marks an engine error as a cancellation when the user pressed Cancel.
func (s *BenchService) noteCancel(runErr error) error {
	s.mu.Lock()
	userCancelled := s.cancelled
	s.mu.Unlock()
	if runErr != nil && userCancelled && !errors.Is(runErr, context.Canceled) {
		runErr = fmt.Errorf("%w: %w", runErr, context.Canceled)
	}
	return runErr
}

// historyRuns is the rows one engine run leaves: its finished tests and the one that did not
// finish.
func (s *BenchService) historyRuns(out BenchOutcome, settings BenchSettings, runErr error, started time.Time) []store.BenchRun {
	// Without the engine's target (it failed before describing the run) the row still says
	// where and with which build it was tried: the engine runs on this machine.
	target := bench.Target{Machine: store.LocalMachine(), EngineVersion: bench.BuildVersion(), EngineCommit: bench.BuildCommit()}
	if out.Target != nil {
		target = *out.Target
	}
	cfg := bench.Config{NPrompt: settings.NPrompt, NGen: settings.NGen, Reps: settings.Reps}
	return bench.HistoryRuns(out.Records, target, cfg, runErr, started)
}

// save stores a click's rows in one transaction (a failure midway leaves none of them) and
// announces how the run ended.
func (s *BenchService) save(runs []store.BenchRun, runErr error) ([]BenchRow, error) {
	var rows []BenchRow
	var saveErr error
	if ids, err := s.store.SaveBenchRuns(context.WithoutCancel(s.ctx), runs); err != nil {
		saveErr = fmt.Errorf("none of the %d result(s) were saved: %w", len(runs), err)
	} else {
		for i, run := range runs {
			run.ID = ids[i]
			if run.CreatedAtMs == 0 {
				run.CreatedAtMs = nowMs()
			}
			rows = append(rows, benchRow(run))
		}
	}

	ev := BenchEvent{Kind: BenchFinished, Rows: rows, AtMs: nowMs()}
	switch bench.RunStatus(runErr) {
	case store.BenchCancelled:
		ev.Kind, ev.Error = BenchCancelled, runErr.Error()
	case store.BenchFailed:
		ev.Kind, ev.Error = BenchFailed, runErr.Error()
	}
	if saveErr != nil {
		ev.Error = strings.TrimPrefix(ev.Error+"; "+saveErr.Error(), "; ")
	}
	s.emit.Emit(EventBench, ev)
	switch {
	case ev.Kind == BenchFailed:
		return rows, fmt.Errorf("benchmark: %w", runErr)
	case saveErr != nil:
		return rows, fmt.Errorf("benchmark results not saved: %w", saveErr)
	}
	return rows, nil
}

// Cancel stops the run in progress; it tells whether there was one. The run ends promptly and is
// saved as cancelled.
func (s *BenchService) Cancel() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return false
	}
	s.cancelled = true
	s.cancel()
	return true
}

// History lists the saved runs matching filter, grouped per GPU (CPU runs per CPU), the group
// with the newest run first and each group's rows newest first. Each ok row carries the change
// against the previous ok run of the same model and test on that GPU.
func (s *BenchService) History(filter BenchFilter) ([]BenchGroup, error) {
	runs, err := s.store.ListBenchRuns(s.ctx, store.BenchFilter{GPU: strings.TrimSpace(filter.GPU), Model: strings.TrimSpace(filter.Model)})
	if err != nil {
		return nil, fmt.Errorf("list benchmark history: %w", err)
	}
	return groupRuns(runs), nil
}

// Import adds the rows of a llama-bench JSON, JSONL or CSV file (or of our own export) that the
// history does not already hold, marked as their tool's, and says how many were new and how
// many duplicates: importing the same file twice adds nothing the second time.
func (s *BenchService) Import(path string) (store.ImportResult, error) {
	path = strings.TrimSpace(path)
	if path == "" {
		return store.ImportResult{}, errors.New("import: no path given; enter the path of a `llama-bench -o json` or `-o jsonl` file")
	}
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, path[2:])
		}
	}
	records, err := bench.ReadLlamaBenchFile(path)
	if err != nil {
		return store.ImportResult{}, fmt.Errorf("import %s: %w", path, err)
	}
	// One transaction for the whole file: a failure midway leaves none of its rows.
	res, err := s.store.ImportBenchRuns(s.ctx, bench.ImportRuns(records))
	if err != nil {
		return store.ImportResult{}, fmt.Errorf("import %s: none of its %d row(s) were saved: %w", path, len(records), err)
	}
	return res, nil
}

// ExportRequest names the rows to export and the form: llama-bench's csv, json, jsonl or md.
type ExportRequest struct {
	Format string  `json:"format"`
	IDs    []int64 `json:"ids"` // empty = every row
}

// Export renders the chosen ok rows (oldest first, as llama-bench prints its tests) in one of
// llama-bench's output forms; the JSON, JSONL and CSV forms import again as the same rows.
func (s *BenchService) Export(req ExportRequest) (string, error) {
	switch req.Format {
	case "csv", "json", "jsonl", "md":
	default:
		return "", fmt.Errorf("export: unknown format %q; choose csv, json, jsonl or md", req.Format)
	}
	runs, err := s.store.ListBenchRuns(s.ctx, store.BenchFilter{})
	if err != nil {
		return "", fmt.Errorf("export benchmark history: %w", err)
	}
	want := map[int64]bool{}
	for _, id := range req.IDs {
		want[id] = true
	}
	var records []bench.Record
	for i := len(runs) - 1; i >= 0; i-- {
		// Only finished rows: llama-bench's forms have no status, and a failed or cancelled
		// test has no figures to compare.
		if runs[i].Status == store.BenchOK && (len(want) == 0 || want[runs[i].ID]) {
			records = append(records, bench.RecordOf(runs[i]))
		}
	}
	var b strings.Builder
	if err := bench.Write(&b, req.Format, records); err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	return b.String(), nil
}

func benchRow(r store.BenchRun) BenchRow {
	samples := make([]float64, len(r.Samples))
	for i, smp := range r.Samples {
		samples[i] = smp.TokensPerSec
	}
	var noisy bool
	var why string
	if r.Status == store.BenchOK {
		noisy, why = bench.Noisy(r.AvgTS, r.StddevTS)
	}
	return BenchRow{
		ID: r.ID, CreatedAtMs: r.CreatedAtMs, Source: r.Source, Status: r.Status, Error: r.Error,
		GPUKey: r.GPUKey, GPUName: r.GPUName, Backend: r.Backend, Model: modelName(r.ModelFile), ModelFile: r.ModelFile,
		ModelType: r.ModelType, Test: r.Test, Reps: r.Reps, AvgTS: r.AvgTS, StddevTS: r.StddevTS,
		TTFTMs: float64(r.TTFTNs) / 1e6, Placement: r.Placement,
		RunKey: r.RunKey, CPU: r.CPU, Quant: quantOf(r), NPrompt: r.NPrompt, NGen: r.NGen, NDepth: r.NDepth, Commit: r.EngineCommit,
		Samples: samples, Noisy: noisy, NoisyReason: why, Decode: r.Decode,
	}
}

// quantOf is the row's quantization: the model's own (our runs), else the last word of
// llama-bench's model_type ("llama 8B Q4_K - Medium" gives "Q4_K").
func quantOf(r store.BenchRun) string {
	if r.ModelQuant != "" {
		return r.ModelQuant
	}
	t := strings.TrimSpace(r.ModelType)
	if i := strings.Index(t, " - "); i >= 0 {
		t = t[:i]
	}
	if f := strings.Fields(t); len(f) > 0 {
		return f[len(f)-1]
	}
	return ""
}

// modelName is the file's base name: "/m/llama-7b.gguf" and "embedded:stories260K.gguf" give
// "llama-7b.gguf" and "stories260K.gguf".
func modelName(file string) string {
	file = strings.TrimPrefix(file, "embedded:")
	if i := strings.LastIndexAny(file, `/\`); i >= 0 {
		return file[i+1:]
	}
	return file
}

// groupKey puts a run under its GPU by name, so a peer's llama-bench rows (which name the GPU but
// carry no device key) sit beside ours; runs without a GPU group by CPU.
func groupKey(r store.BenchRun) (key, label, kind string) {
	if name := strings.TrimSpace(r.GPUName); name != "" {
		return "gpu:" + strings.ToLower(name), name, "gpu"
	}
	cpu := strings.TrimSpace(r.CPU)
	if cpu == "" {
		cpu = "unknown CPU"
	}
	return "cpu:" + strings.ToLower(cpu), "CPU · " + cpu, "cpu"
}

// groupRuns groups runs (newest first, as the store lists them) per GPU and computes each ok
// row's change against the previous ok run of the same model and test in its group.
func groupRuns(runs []store.BenchRun) []BenchGroup {
	groups := []BenchGroup{}
	index := map[string]int{}
	for _, r := range runs {
		key, label, kind := groupKey(r)
		i, ok := index[key]
		if !ok {
			i = len(groups)
			index[key] = i
			groups = append(groups, BenchGroup{Key: key, Label: label, Kind: kind, Scores: []RunScore{}})
		}
		groups[i].Rows = append(groups[i].Rows, benchRow(r))
	}
	for gi := range groups {
		rows := groups[gi].Rows
		sort.SliceStable(rows, func(a, b int) bool {
			if rows[a].CreatedAtMs != rows[b].CreatedAtMs {
				return rows[a].CreatedAtMs > rows[b].CreatedAtMs
			}
			return rows[a].ID > rows[b].ID
		})
		last := map[string]int{} // model+test -> index of the latest ok row seen, walking oldest first
		for i := len(rows) - 1; i >= 0; i-- {
			r := &rows[i]
			if r.Status != store.BenchOK || r.AvgTS <= 0 {
				continue
			}
			k := strings.ToLower(r.Model) + "\x00" + r.Test
			if p, ok := last[k]; ok {
				prev := rows[p]
				d := (r.AvgTS - prev.AvgTS) / prev.AvgTS * 100
				r.PrevID, r.PrevSource, r.PrevTS, r.PrevDecode, r.DeltaPct = prev.ID, prev.Source, prev.AvgTS, prev.Decode, &d
			}
			last[k] = i
		}
		groups[gi].Runs, groups[gi].Scores = runsAndScores(rows)
	}
	return groups
}

// runsAndScores counts a group's runs (rows saved before run keys existed count one each) and
// scores those that measured LocalScore's shapes, newest first as rows are.
func runsAndScores(rows []BenchRow) (int, []RunScore) {
	runs := map[string][]bench.Record{}
	var order []string
	first := map[string]BenchRow{}
	for _, r := range rows {
		key := r.RunKey
		if key == "" {
			key = fmt.Sprintf("row:%d", r.ID)
		}
		if _, ok := runs[key]; !ok {
			order = append(order, key)
			first[key] = r
			runs[key] = nil
		}
		if f := first[key]; f.Model == "" && r.Model != "" { // a row that failed before the engine named the model
			f.Model = r.Model
			first[key] = f
		}
		if r.Status == store.BenchOK {
			rec := bench.Record{NPrompt: r.NPrompt, NGen: r.NGen, NDepth: r.NDepth, TTFTMs: r.TTFTMs}
			rec.AvgTs = r.AvgTS
			runs[key] = append(runs[key], rec)
		}
	}
	scores := []RunScore{}
	for _, key := range order {
		if sum := bench.ScoreLocal(runs[key]); sum.Shapes > 0 {
			r := first[key]
			scores = append(scores, RunScore{RunKey: key, Model: r.Model, CreatedAtMs: r.CreatedAtMs, LocalScoreSummary: sum})
		}
	}
	return len(order), scores
}
