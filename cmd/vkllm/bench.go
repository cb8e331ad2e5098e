package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/store"
)

func init() {
	register("bench", "benchmark prompt processing and generation like llama-bench (pp512/tg128), saved per GPU", runBench)
}

type benchFlags struct {
	model     string
	nPrompt   int
	nGen      int
	reps      int
	gpu, cpu  bool
	output    string
	ref       string
	threads   int
	device    int
	noSave    bool
	seed      uint64
	ctxLength int
	depths    depthList
}

// depthList is llama-bench's -d: a comma-separated list of token counts ("0,4096").
type depthList []int

func (d *depthList) String() string {
	if d == nil || len(*d) == 0 {
		return "0"
	}
	parts := make([]string, len(*d))
	for i, v := range *d {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func (d *depthList) Set(s string) error {
	var out []int
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || v < 0 {
			return fmt.Errorf("depth %q is not a token count: want comma-separated counts of 0 or more, like 0,4096", part)
		}
		out = append(out, v)
	}
	*d = out
	return nil
}

func runBench(ctx context.Context, args []string) error {
	var f benchFlags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&f.model, "m", "", "GGUF model file (default: the embedded model)")
	fs.IntVar(&f.nPrompt, "p", 512, "prompt tokens for the pp test (0 skips it)")
	fs.IntVar(&f.nGen, "n", 128, "generated tokens for the tg test (0 skips it)")
	fs.IntVar(&f.reps, "r", 5, "timed repetitions per test")
	fs.BoolVar(&f.gpu, "gpu", false, "run on the GPU (fail if the GPU backend declines)")
	fs.BoolVar(&f.cpu, "cpu", false, "run on the CPU")
	fs.StringVar(&f.output, "o", "md", "output format: "+strings.Join(bench.Formats, ", "))
	fs.StringVar(&f.ref, "ref", "", "path to a llama-bench binary to run on the same model afterwards for comparison")
	fs.IntVar(&f.threads, "t", 0, "CPU threads (default: all cores)")
	fs.IntVar(&f.device, "device", -1, "Vulkan device index (default: VKLLM_DEVICE or the best discrete GPU)")
	fs.BoolVar(&f.noSave, "no-save", false, "do not record the run in the results history")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the synthetic prompts")
	fs.IntVar(&f.ctxLength, "ctx", 0, "context to load the model with (default: enough for the tests at the deepest depth)")
	fs.Var(&f.depths, "d", "tokens already in the cache before each test, filled untimed (llama-bench's -d; a list like 0,4096 runs every test at each)")
	fs.Var(&f.depths, "depth", "same as -d")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.gpu && f.cpu {
		return fmt.Errorf("--gpu and --cpu exclude each other: %w", errUsage)
	}
	if f.reps < 1 || f.nPrompt < 0 || f.nGen < 0 || f.nPrompt+f.nGen == 0 {
		return fmt.Errorf("need -r >= 1 and -p or -n > 0: %w", errUsage)
	}
	if !validFormat(f.output) {
		return fmt.Errorf("unknown -o %q (want one of %s): %w", f.output, strings.Join(bench.Formats, ", "), errUsage)
	}
	if f.device < 0 && config.Device.Set() {
		f.device = config.Device.Int()
	}

	cfg := bench.Config{NPrompt: f.nPrompt, NGen: f.nGen, Reps: f.reps, Depths: f.depths, Seed: f.seed}
	ctxLen := f.ctxLength
	if ctxLen == 0 {
		// Sized from the tests, the context must stay within the model's own: a typo such as
		// -p 1000000000 would otherwise allocate for it. --ctx runs past it on purpose.
		if train, err := engine.TrainingContext(f.model); err == nil && cfg.NeedContext() > train {
			return fmt.Errorf("the tests need %d positions of context but the model was trained for %d; lower -p, -n or -d, or pass --ctx %d to run past its training context: %w",
				cfg.NeedContext(), train, cfg.NeedContext(), errUsage)
		}
		ctxLen = cfg.NeedContext() + 16
	} else if err := cfg.CheckContext(ctxLen); err != nil {
		return fmt.Errorf("--ctx %d is too small: %w; raise --ctx to %d or more, or leave it out to size the context from the tests: %w",
			ctxLen, err, cfg.NeedContext(), errUsage)
	}

	backend := engine.BackendAuto
	switch {
	case f.gpu:
		backend = engine.BackendGPU
	case f.cpu:
		backend = engine.BackendCPU
	}
	load := bench.Load{Cached: -1}
	if f.model != "" {
		if frac, err := bench.PageCacheFraction(f.model); err == nil {
			load.Cached = frac
		} else {
			slog.Debug("bench: page cache not measured", "err", err)
		}
	}
	loadStart := time.Now()
	e, err := engine.Load(ctx, engine.LoadOptions{Path: f.model, Backend: backend, Context: ctxLen, Threads: f.threads, DeviceIndex: f.device, StoredPinMB: store.StoredPinMB})
	if err != nil {
		return fmt.Errorf("load model for bench: %w", err)
	}
	load.Duration = time.Since(loadStart)
	info := e.Info()
	load.Bytes, load.Placement, load.GPUSetup = info.FileSize, info.Placement, info.GPUSetup
	fmt.Fprintf(os.Stderr, "load: %s\n", load)
	if err := cfg.CheckContext(info.Context); info.Context > 0 && err != nil {
		_ = e.Close()
		return fmt.Errorf("bench %s: %w: the %s placement holds %d of the %d positions asked for (the plan's log line says what bounded it); lower -d, -p or -n, or run with --cpu",
			info.Name, err, info.Placement, info.Context, ctxLen)
	}
	meta := bench.DescribeTarget(info, bench.TargetOptions{DeviceIndex: f.device, Threads: f.threads, EngineVersion: version, File: e.File()})
	meta.LoadNs = load.Duration.Nanoseconds()

	progress := newProgressBar(os.Stderr)
	started := time.Now()
	cfg.VocabSize, cfg.Context = info.VocabSize, info.Context
	cfg.SteadyWarmup = info.Placement != "cpu" // a GPU's first run creates pipelines, then its clocks ramp
	records, runErr := bench.Run(ctx, e.Runner(), cfg, progress.update)
	progress.finish()
	_ = e.Close()
	for i := range records {
		meta.Fill(&records[i])
	}

	var saveErr error
	if !f.noSave {
		saveErr = saveBenchRecords(records, meta, cfg, runErr, started)
	}
	if runErr != nil {
		if len(records) > 0 {
			_ = bench.Write(os.Stdout, f.output, records)
		}
		if saveErr != nil {
			slog.Error("bench results not saved", "err", saveErr)
		}
		if errors.Is(runErr, bench.ErrCancelled) {
			return fmt.Errorf("bench cancelled after %d finished test(s); the cancelled run is recorded as such", len(records))
		}
		return fmt.Errorf("bench %s: %w", info.Name, runErr)
	}
	if f.ref == "" {
		if err := bench.Write(os.Stdout, f.output, records); err != nil {
			return err
		}
		return saveErr
	}
	peer, err := runReference(ctx, f, meta)
	if err != nil {
		_ = bench.Write(os.Stdout, f.output, records)
		return fmt.Errorf("reference run: %w", err)
	}
	if !f.noSave && saveErr == nil {
		saveErr = saveBenchRecords(peer, bench.Target{}, cfg, nil, started)
	}
	if err := bench.Write(os.Stdout, f.output, append(append([]bench.Record{}, records...), peer...)); err != nil {
		return err
	}
	printRatios(os.Stdout, records, peer)
	return saveErr
}

func validFormat(s string) bool {
	for _, f := range bench.Formats {
		if f == s {
			return true
		}
	}
	return false
}

// saveBenchRecords writes the run's rows (bench.HistoryRuns: finished tests as ok rows and, when
// the run failed or was cancelled, one row for the test that did not finish) in one transaction:
// all of them or, on a full disk or a kill, none. The results are printed either way; the error
// makes the command exit non-zero with the cause.
func saveBenchRecords(records []bench.Record, t bench.Target, cfg bench.Config, runErr error, started time.Time) error {
	runs := bench.HistoryRuns(records, t, cfg, runErr, started)
	if len(runs) == 0 {
		return nil
	}
	st, err := store.Open("")
	if err != nil {
		return fmt.Errorf("bench results printed but not saved to the history: %w (or pass --no-save)", err)
	}
	defer st.Close()
	if _, err := st.SaveBenchRuns(context.Background(), runs); err != nil {
		return fmt.Errorf("bench results printed but not saved to the history: %w (or pass --no-save)", err)
	}
	return nil
}

// runReference runs a llama-bench binary on the same model with matching flags and parses its
// JSON. Our model is already freed, so both runs get the whole device.
func runReference(ctx context.Context, f benchFlags, t bench.Target) ([]bench.Record, error) {
	if f.model == "" {
		return nil, fmt.Errorf("--ref needs -m FILE: llama-bench cannot open the embedded model")
	}
	abs, err := filepath.Abs(f.model)
	if err != nil {
		return nil, fmt.Errorf("resolve model path: %w", err)
	}
	ngl := "0"
	if t.Backend == "Vulkan" {
		ngl = "99"
	}
	args := []string{"-m", abs, "-p", fmt.Sprint(f.nPrompt), "-n", fmt.Sprint(f.nGen), "-r", fmt.Sprint(f.reps), "-ngl", ngl, "-o", "json"}
	if f.threads > 0 {
		args = append(args, "-t", fmt.Sprint(f.threads))
	}
	if len(f.depths) > 0 {
		args = append(args, "-d", f.depths.String())
	}
	slog.Info("running reference", "binary", f.ref, "args", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, f.ref, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("run %s: %w (is it llama-bench, and does it open %s?)", f.ref, err, abs)
	}
	recs, err := bench.ParseLlamaBench(strings.NewReader(string(out)))
	if err != nil {
		return nil, fmt.Errorf("read %s output: %w", f.ref, err)
	}
	for i := range recs {
		if recs[i].Placement == "" {
			recs[i].Placement = "ngl " + ngl
		}
	}
	return recs, nil
}

// printRatios prints our rate over the reference's for each test both ran.
func printRatios(w io.Writer, ours, ref []bench.Record) {
	peer := map[string]bench.Record{}
	for _, r := range ref {
		peer[r.TestName()] = r
	}
	fmt.Fprintln(w)
	for _, r := range ours {
		p, ok := peer[r.TestName()]
		if !ok || p.AvgTs == 0 {
			fmt.Fprintf(w, "%s: no llama-bench row to compare\n", r.TestName())
			continue
		}
		fmt.Fprintf(w, "%s: vkllm %.2f t/s vs llama-bench %.2f t/s = %.2fx\n", r.TestName(), r.AvgTs, p.AvgTs, r.AvgTs/p.AvgTs)
	}
}

// progressBar draws a one-line bar on a terminal and logs plain lines elsewhere.
type progressBar struct {
	w        io.Writer
	terminal bool
	last     time.Time
}

func newProgressBar(w *os.File) *progressBar {
	fi, err := w.Stat()
	return &progressBar{w: w, terminal: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

func (p *progressBar) update(ev bench.Progress) {
	if ev.Phase == bench.PhaseDone {
		return
	}
	label := fmt.Sprintf("rep %d/%d", ev.Rep, ev.Reps)
	switch ev.Phase {
	case bench.PhaseWarmup:
		label = "warm-up"
	case bench.PhaseDepth:
		label = "depth fill"
	}
	if !p.terminal {
		slog.Info("bench", "test", ev.Test, "step", label, "t/s", fmt.Sprintf("%.2f", ev.TokensPS))
		return
	}
	const width = 30
	done := width * ev.Step / max(ev.Steps, 1)
	fmt.Fprintf(p.w, "\r[%s%s] %3d%% %-6s %-10s %10.2f t/s", strings.Repeat("#", done), strings.Repeat(".", width-done),
		100*ev.Step/max(ev.Steps, 1), ev.Test, label, ev.TokensPS)
}

func (p *progressBar) finish() {
	if p.terminal {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
