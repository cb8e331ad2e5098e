package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/store"
)

// The one code path from a bench run to a history row: the CLI (`vkllm bench`), the sidecar's
// POST /vkllm/bench and the desktop app all describe the target with DescribeTarget, fill each
// record with Target.Fill and turn records into rows with HistoryRuns (or StoreRun), so the rows
// they save are identical.

// Target is what a run was measured on: the model, the device, the machine and the build. It
// travels as JSON from the engine process to the app, which saves the rows.
type Target struct {
	Model         engine.ModelInfo   `json:"model"`
	ModelFile     string             `json:"model_file"` // the path, or "embedded:<name>"
	ModelSHA256   string             `json:"model_sha256,omitempty"`
	ModelType     string             `json:"model_type"` // llama-bench's "llama 7B Q4_K"
	Backend       string             `json:"backend"`    // llama-bench's label: "Vulkan" or "CPU"
	GPU           *vulkan.DeviceInfo `json:"gpu,omitempty"`
	Machine       store.Machine      `json:"machine"`
	Threads       int                `json:"threads"`
	EngineVersion string             `json:"engine_version"`
	EngineCommit  string             `json:"engine_commit"`
	Plan          *PlanFacts         `json:"plan,omitempty"` // the resident plan on the GPU; nil on the CPU
	// LoadNs is how long the model took from its file to ready (Load); 0 when the process that
	// ran the bench did not time the load.
	LoadNs int64 `json:"load_ns,omitempty"`
}

// PlanFacts is the resident plan's verdict as the history keeps it.
type PlanFacts struct {
	Verdict       string `json:"verdict"` // the plan's one-line verdict text
	Armed         bool   `json:"armed"`
	HeadroomBytes int64  `json:"headroom_bytes"`
	Source        string `json:"source"` // heap | budget | pin
	PinMB         int    `json:"pin_mb"`
}

// TargetOptions says what DescribeTarget cannot learn from the model alone.
type TargetOptions struct {
	DeviceIndex   int    // the Vulkan device asked for; -1 = VKLLM_DEVICE or the best one, as the engine chose
	Threads       int    // CPU threads asked for; 0 = VKLLM_THREADS or every core
	EngineVersion string // "" = the version the binary was built as (BuildVersion)
	// File is the loaded model's GGUF; with it a GPU target carries the resident plan the engine
	// computed (planinput.ForDevice, as the Vulkan backend calls it). nil leaves Plan empty.
	File *gguf.File
}

// DescribeTarget gathers the facts of a loaded model's run: the GPU it runs on (when the backend is
// Vulkan), this machine, the build and the model file's sha256. A fact that cannot be had (no
// Vulkan loader, an unreadable file) stays empty and is logged, never fails the run.
func DescribeTarget(info engine.ModelInfo, opts TargetOptions) Target {
	t := Target{Model: info, ModelFile: info.Path, Machine: store.LocalMachine(), EngineVersion: opts.EngineVersion, EngineCommit: BuildCommit()}
	if t.EngineVersion == "" {
		t.EngineVersion = BuildVersion()
	}
	if t.ModelFile == "" {
		t.ModelFile = "embedded:" + info.Name
	}
	t.ModelType = fmt.Sprintf("%s %s %s", info.Arch, SizeLabel(info.Params), info.Quant)
	t.Backend = "CPU"
	if info.Backend == "vulkan" {
		t.Backend = "Vulkan"
		devs, err := vulkan.Devices()
		if err == nil {
			var d vulkan.DeviceInfo
			if d, err = vulkan.ChooseDevice(devs, opts.DeviceIndex); err == nil {
				t.GPU = &d
			}
		}
		if err == nil && opts.File != nil {
			var p plan.Plan
			if p, err = planinput.ForDevice(opts.File, *t.GPU, 0, info.Context, false); err == nil {
				t.Plan = &PlanFacts{Verdict: p.Verdict.Text, Armed: p.Verdict.Armed, HeadroomBytes: p.Headroom.Bytes, Source: p.Source, PinMB: p.Pin.MB}
			}
		}
		if err != nil {
			slog.Warn("bench: GPU facts unavailable", "err", err)
		}
	}
	t.Threads = opts.Threads
	if t.Threads <= 0 {
		t.Threads = config.Threads.Int()
	}
	if t.Threads <= 0 {
		t.Threads = runtime.NumCPU()
	}
	if info.Path != "" {
		sum, err := cachedSHA256(info.Path)
		if err != nil {
			slog.Warn("bench: model checksum unavailable", "path", info.Path, "err", err)
		}
		t.ModelSHA256 = sum
	} else if info.Name == embedded.Name {
		sum := sha256.Sum256(embedded.ModelGGUF)
		t.ModelSHA256 = hex.EncodeToString(sum[:])
	}
	return t
}

// Fill writes the target's facts into the llama-bench fields of r.
func (t Target) Fill(r *Record) {
	r.BuildCommit = t.EngineCommit
	r.CPUInfo = t.Machine.CPU
	if t.GPU != nil {
		r.GPUInfo = t.GPU.Name
	}
	r.Backends = t.Backend
	r.ModelFile = t.ModelFile
	r.ModelType = t.ModelType
	r.ModelSize = t.Model.FileSize
	r.ModelParams = t.Model.Params
	r.NBatch, r.NUBatch = 512, 512
	r.NThreads = t.Threads
	r.Placement = t.Model.Placement
	if r.Placement == "" {
		r.Placement = "cpu"
	}
	if t.Backend == "Vulkan" {
		r.NGPULayers = t.Model.Layers + 1
	}
	if r.Tool == "" {
		r.Tool = "vkllm"
	}
	if t.LoadNs > 0 {
		r.LoadMs = float64(t.LoadNs) / 1e6
		r.LoadGBps = LoadGBps(r.ModelSize, t.LoadNs)
	}
}

// StoreRun turns a record into the history row with the full context of the run. Records of other
// tools (imported llama-bench rows) keep only what their own JSON says; t is not applied to them.
func StoreRun(r Record, t Target, status, errText string) store.BenchRun {
	run := store.BenchRun{
		Source: r.Tool, Status: status, Error: errText,
		Backend: strings.ToLower(r.Backends), GPUName: r.GPUInfo, CPU: r.CPUInfo, Threads: r.NThreads,
		EngineCommit: r.BuildCommit,
		ModelFile:    r.ModelFile, ModelType: r.ModelType, ModelParams: r.ModelParams, ModelSize: r.ModelSize,
		Placement: r.Placement, Test: r.TestName(), NPrompt: r.NPrompt, NGen: r.NGen, NDepth: r.NDepth, Reps: r.Reps, Warmup: r.Warmup,
		AvgNs: r.AvgNs, StddevNs: r.StddevNs, AvgTS: r.AvgTs, StddevTS: r.StddevTs, TTFTNs: int64(r.TTFTMs * 1e6),
		LoadNs: int64(math.Round(r.LoadMs * 1e6)), Decode: r.Decode,
	}
	if ts, err := time.Parse(time.RFC3339, r.TestTime); err == nil {
		run.CreatedAtMs = ts.UnixMilli()
	}
	if r.Tool == "vkllm" {
		m := t.Machine
		run.Hostname, run.OS, run.Kernel, run.RAMBytes = m.Hostname, m.OS, m.Kernel, m.RAMBytes
		run.EngineVersion = t.EngineVersion
		run.ModelSHA256, run.ModelArch, run.ModelQuant = t.ModelSHA256, t.Model.Arch, t.Model.Quant
		run.Context = t.Model.Context
		run.PlanVerdict = t.Model.Placement
		if p := t.Plan; p != nil {
			run.PlanVerdict, run.PlanHeadroomBytes, run.PlanSource, run.PlanPinMB = p.Verdict, p.HeadroomBytes, p.Source, p.PinMB
		}
		if t.GPU != nil {
			g := t.GPU
			run.GPUKey, run.GPUVendorID, run.GPUDeviceID, run.GPUUUID = g.Key(), g.VendorID, g.DeviceID, g.UUID
			run.DriverName, run.DriverVersion, run.VulkanAPI = g.DriverName, g.DriverInfo, g.APIVersion
		}
	}
	for i, ns := range r.SamplesNs {
		s := store.BenchSample{Rep: i + 1, Ns: ns}
		if i < len(r.SamplesTs) {
			s.TokensPerSec = r.SamplesTs[i]
		}
		run.Samples = append(run.Samples, s)
	}
	return run
}

// ImportRuns turns the records of an imported file into history rows, marked as their tool's
// (StoreRun with no target). Rows of one invocation share a run key: the same tool, build,
// machine, GPU, model and threads make one run, so "N runs" counts a file of pp512 and tg128 as
// one run, as llama-bench ran it.
func ImportRuns(records []Record) []store.BenchRun {
	runs := make([]store.BenchRun, len(records))
	for i, r := range records {
		runs[i] = StoreRun(r, Target{}, store.BenchOK, "")
		h := sha256.Sum256([]byte(strings.Join([]string{r.Tool, r.BuildCommit, r.CPUInfo, r.GPUInfo, r.Backends,
			r.ModelFile, r.ModelType, fmt.Sprint(r.NThreads)}, "\x00")))
		runs[i].RunKey = "import:" + hex.EncodeToString(h[:8])
	}
	return runs
}

// RecordOf maps a history row back to llama-bench's field names, for export: the inverse of
// StoreRun for the fields llama-bench's JSON has, so an exported file imports again as the same
// rows (and is recognised as duplicates of them).
func RecordOf(r store.BenchRun) Record {
	rec := Record{
		BuildCommit: r.EngineCommit, CPUInfo: r.CPU, GPUInfo: r.GPUName, Backends: r.Backend, ModelFile: r.ModelFile,
		ModelType: r.ModelType, ModelSize: r.ModelSize, ModelParams: r.ModelParams, NThreads: r.Threads,
		NPrompt: r.NPrompt, NGen: r.NGen, NDepth: r.NDepth, TestTime: time.UnixMilli(r.CreatedAtMs).UTC().Format(time.RFC3339),
		Tool: r.Source, Placement: r.Placement, TTFTMs: float64(r.TTFTNs) / 1e6, Reps: r.Reps, Warmup: r.Warmup,
		TypeK: "f16", TypeV: "f16", NBatch: 512, NUBatch: 512, Decode: r.Decode,
	}
	rec.AvgNs, rec.StddevNs, rec.AvgTs, rec.StddevTs = r.AvgNs, r.StddevNs, r.AvgTS, r.StddevTS
	if r.LoadNs > 0 {
		rec.LoadMs, rec.LoadGBps = float64(r.LoadNs)/1e6, LoadGBps(r.ModelSize, r.LoadNs)
	}
	for _, s := range r.Samples {
		rec.SamplesNs = append(rec.SamplesNs, s.Ns)
		rec.SamplesTs = append(rec.SamplesTs, s.TokensPerSec)
	}
	return rec
}

// RunStatus is the history status of a run that ended with err: ok, cancelled (the context ended
// or the user stopped it) or failed.
func RunStatus(err error) string {
	switch {
	case err == nil:
		return store.BenchOK
	case errors.Is(err, ErrCancelled), errors.Is(err, context.Canceled):
		return store.BenchCancelled
	default:
		return store.BenchFailed
	}
}

// HistoryRuns is every row one run leaves in the history: each finished test as an ok row and,
// when the run failed or was cancelled (runErr != nil), one more row for the test that did not
// finish, with its status and the error. records must already be filled (Target.Fill).
func HistoryRuns(records []Record, t Target, cfg Config, runErr error, started time.Time) []store.BenchRun {
	runs := make([]store.BenchRun, 0, len(records)+1)
	for _, r := range records {
		runs = append(runs, StoreRun(r, t, store.BenchOK, ""))
	}
	if runErr == nil {
		return runs
	}
	unfinished := Record{Tool: "vkllm", TestTime: started.UTC().Format(time.RFC3339), Reps: cfg.Reps, Warmup: 1}
	if tests := cfg.Tests(); len(tests) > 0 {
		s := tests[min(len(records), len(tests)-1)] // the tests finish in plan order
		unfinished.NPrompt, unfinished.NGen, unfinished.NDepth = s.NPrompt, s.NGen, s.Depth
	}
	t.Fill(&unfinished)
	return append(runs, StoreRun(unfinished, t, RunStatus(runErr), runErr.Error()))
}

// SizeLabel is the "7B"-style size llama-bench puts in model_type.
func SizeLabel(params int64) string {
	switch {
	case params >= 1e9:
		return fmt.Sprintf("%.0fB", float64(params)/1e9)
	case params >= 1e6:
		return fmt.Sprintf("%.0fM", float64(params)/1e6)
	default:
		return fmt.Sprintf("%.0fK", float64(params)/1e3)
	}
}

// FileSHA256 is the hex sha256 of a file's bytes.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// shaCache keeps the checksums a long-lived process (the sidecar) already computed, so a second
// bench of a multi-GiB model does not hash it again. An entry holds while the file's size and
// modification time stay the same.
var shaCache sync.Map // path -> shaEntry

type shaEntry struct {
	size  int64
	mtime time.Time
	sum   string
}

func cachedSHA256(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("stat %s: %w", path, err)
	}
	if e, ok := shaCache.Load(path); ok {
		if e := e.(shaEntry); e.size == fi.Size() && e.mtime.Equal(fi.ModTime()) {
			return e.sum, nil
		}
	}
	sum, err := FileSHA256(path)
	if err != nil {
		return "", err
	}
	shaCache.Store(path, shaEntry{size: fi.Size(), mtime: fi.ModTime(), sum: sum})
	return sum, nil
}

// BuildVersion is the main module's version as the Go toolchain stamped it, "dev" for a build
// from a work tree.
func BuildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok || info.Main.Version == "" || info.Main.Version == "(devel)" {
		return "dev"
	}
	return info.Main.Version
}

// linkedCommit is the revision the Makefile links in (-ldflags -X) for builds where go build
// stamps no VCS facts (GOFLAGS=-buildvcs=false, or a tree git cannot read).
var linkedCommit string

// BuildCommit is the VCS revision the binary was built from (go build stamps it), shortened, with
// "+dirty" when the work tree had changes; else the revision the Makefile linked in.
func BuildCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return linkedCommit
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 8 {
		rev = rev[:8]
	}
	if dirty && rev != "" {
		rev += "+dirty"
	}
	if rev == "" {
		return linkedCommit
	}
	return rev
}
