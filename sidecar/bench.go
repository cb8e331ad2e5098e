package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
)

// benchable is a loaded model the bench can drive: *engine.Engine has its runner.
type benchable interface {
	Runner() model.Runner
}

// BenchRequest is the body of POST /vkllm/bench; the defaults are llama-bench's (-p 512 -n 128 -r 5).
type BenchRequest struct {
	NPrompt *int   `json:"n_prompt"`
	NGen    *int   `json:"n_gen"`
	Reps    int    `json:"reps"`
	Seed    uint64 `json:"seed"`
}

// BenchEvent is one SSE event of POST /vkllm/bench: first the target (the model, GPU, machine and
// build the run measures, bench.DescribeTarget), progress while it runs, then done (with the
// records, filled from the target) or error (with cancelled set when the client stopped it). The
// target and the records are all bench.HistoryRuns needs to save the rows the CLI would save.
type BenchEvent struct {
	Kind      string          `json:"kind"` // bench:target | bench:progress | bench:done | bench:error
	Target    *bench.Target   `json:"target,omitempty"`
	Progress  *bench.Progress `json:"progress,omitempty"`
	Records   []bench.Record  `json:"records,omitempty"`
	Error     string          `json:"error,omitempty"`
	Cancelled bool            `json:"cancelled,omitempty"`
}

// handleBench runs the llama-bench-style tests on the loaded model in its turn in the queue,
// streaming progress as server-sent events. Closing the request cancels the run. The records
// come back filled with the target's facts; saving them is the caller's job: the app is the one
// writer of the history, this process never writes it.
func (s *server) handleBench(w http.ResponseWriter, r *http.Request) {
	var req BenchRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	cfg := bench.Config{NPrompt: 512, NGen: 128, Reps: 5, Seed: req.Seed}
	if req.NPrompt != nil {
		cfg.NPrompt = *req.NPrompt
	}
	if req.NGen != nil {
		cfg.NGen = *req.NGen
	}
	if req.Reps != 0 {
		cfg.Reps = req.Reps
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	// Every count is checked against the loaded model's context before anything is queued or
	// allocated: a billion-token test would otherwise build its synthetic prompt first.
	if err := checkBenchCounts(cfg); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if m, err := s.current(); err == nil {
		if _, ok := m.(benchable); !ok {
			writeError(w, http.StatusNotImplemented, "server_error", "the loaded model has no runner to benchmark")
			return
		}
		if err := cfg.CheckContext(m.Info().Context); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("%v; lower n_prompt or n_gen, or load the model with a larger context (--ctx)", err))
			return
		}
	}
	ctx := r.Context()
	if err := s.queue.acquire(ctx); err != nil {
		return
	}
	defer s.queue.release()
	m, err := s.current()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", err.Error())
		return
	}
	b, ok := m.(benchable)
	if !ok {
		writeError(w, http.StatusNotImplemented, "server_error", "the loaded model has no runner to benchmark")
		return
	}
	info := m.Info()
	cfg.VocabSize, cfg.Context = info.VocabSize, info.Context // Run checks it again for a model loaded meanwhile
	cfg.SteadyWarmup = info.Placement != "cpu"                // a GPU's first run creates pipelines, then its clocks ramp
	runner := b.Runner()

	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	opts := bench.TargetOptions{DeviceIndex: -1}
	if withFile, ok := m.(interface{ File() *gguf.File }); ok {
		opts.File = withFile.File() // the resident plan's verdict goes with the GPU's rows
	}
	target := bench.DescribeTarget(info, opts)
	send := func(ev BenchEvent) {
		data, err := json.Marshal(ev)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send(BenchEvent{Kind: "bench:target", Target: &target})
	records, err := bench.Run(ctx, runner, cfg, func(p bench.Progress) {
		send(BenchEvent{Kind: "bench:progress", Progress: &p})
	})
	runner.Reset() // the next chat starts from an empty cache
	for i := range records {
		target.Fill(&records[i])
	}
	if err != nil {
		send(BenchEvent{Kind: "bench:error", Target: &target, Records: records, Error: err.Error(), Cancelled: errors.Is(err, bench.ErrCancelled) || errors.Is(err, context.Canceled)})
		return
	}
	send(BenchEvent{Kind: "bench:done", Target: &target, Records: records})
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// checkBenchCounts refuses counts out of range, naming the field.
func checkBenchCounts(cfg bench.Config) error {
	switch {
	case cfg.NPrompt < 0:
		return fmt.Errorf("n_prompt %d is negative: want 0 (skip the pp test) or more", cfg.NPrompt)
	case cfg.NGen < 0:
		return fmt.Errorf("n_gen %d is negative: want 0 (skip the tg test) or more", cfg.NGen)
	case cfg.NPrompt+cfg.NGen == 0:
		return errors.New("n_prompt and n_gen are both 0: give at least one test a size")
	case cfg.Reps < 1:
		return fmt.Errorf("reps %d is out of range: want 1 or more (0 or absent: 5)", cfg.Reps)
	}
	return nil
}
