package vulkan

import (
	"log/slog"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pipelines made ahead. A pipeline is made the first time a recording asks for its kernel
// (Context.Kernel), and NVIDIA's driver compiles it then from SPIR-V unless its disk cache holds
// it: on an H100 with that cache empty, one process spent 1.0 s recording the 1B's decode step
// and 16 s in its first 4-token prompt, one pipeline after another. The resident driver instead
// learns which kernels a recording will ask for from a dry recording (a Seq that records
// nothing and collects the names, wantsKernels) and makes them on several cores at once: the
// decode step's before its command is recorded, the prompt windows' in the background once the
// model is loaded (VKLLM_GPU_PRECOMPILE). Measured on that H100 (docs/PERF.md, session 22): the
// decode step's recording went from 812-940 ms to 366-431; the first prompt did not gain, one
// pipeline (the cm2 F16 GEMM) being nearly all of its 11-15 s, but a prompt typed after the
// background has made it finds it made. Close waits for a pipeline being made (Vulkan cannot
// cancel one), up to that one pipeline's time on a cold cache.

// kernelShape is what a kernel is made with: its bindings and push-constant bytes.
type kernelShape struct{ bindings, push int }

// precompileWorkers is how many pipelines are made at once: the cores but one, at most 8.
func precompileWorkers() int { return max(1, min(8, runtime.NumCPU()-1)) }

// precompile makes the kernels of wants the context has not made yet, on up to workers
// goroutines, and returns how many it made; stop (may be nil) is checked before each one. A
// kernel that fails here is left to the recording, which asks again and reports the error.
func (c *Context) precompile(wants map[string]kernelShape, workers int, stop func() bool) int {
	var todo []string
	c.kernelMu.Lock()
	for name := range wants {
		if _, made := c.kernels[name]; !made {
			todo = append(todo, name)
		}
	}
	c.kernelMu.Unlock()
	var (
		next, made atomic.Int64
		wg         sync.WaitGroup
	)
	for range min(workers, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) || stop != nil && stop() {
					return
				}
				sh := wants[todo[i]]
				if _, err := c.Kernel(todo[i], sh.bindings, sh.push); err != nil {
					slog.Debug("precompile: kernel left to its recording", "kernel", todo[i], "err", err)
					continue
				}
				made.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(made.Load())
}

// wantsKernels returns the kernels record asks for when it records into a dry Seq (one that
// records nothing) whose span is span.
func (r *Resident) wantsKernels(span int, record func(s *Seq)) map[string]kernelShape {
	wants := map[string]kernelShape{}
	record(&Seq{c: r.c, err: errDryRecording, wants: wants, span: span})
	return wants
}

// windowKernels returns the kernels prompt windows of m rows ask for: the forward and the
// last row's head (the staging order as a real window leaves it: none planned).
func (r *Resident) windowKernels(m int) map[string]kernelShape {
	return r.wantsKernels(m, func(s *Seq) {
		r.beginStagingPass(nil)
		r.record(s, m)
		r.beginStagingPass(nil)
		if r.hasHead {
			r.head(s, m-1, 1)
		}
	})
}

// precompileWindows starts making, in the background, the kernels of a full prompt window and
// of a short one (their products and attention take different kernels: windowKernels' rows
// r.rows and 2), which Close stops and waits for. It does nothing where the context does not
// make them ahead (windowsAhead: off on a CPU device such as lavapipe, whose compiles would
// compete with the work at hand, and in the package's tests, which check what each recording
// makes).
func (r *Resident) precompileWindows() {
	if !r.c.windowsAhead || r.rows < 2 {
		return
	}
	wants := r.windowKernels(r.rows)
	maps.Copy(wants, r.windowKernels(2))
	r.precompiling.Add(1)
	go func() {
		defer r.precompiling.Done()
		t0 := time.Now()
		n := r.c.precompile(wants, precompileWorkers(), r.precompileStop.Load)
		slog.Debug("precompile: prompt window kernels made", "made", n, "wanted", len(wants), "ms", time.Since(t0).Milliseconds())
	}()
}

// stopPrecompile asks the background precompile to end after the kernels it is making and
// waits for it.
func (r *Resident) stopPrecompile() {
	r.precompileStop.Store(true)
	r.precompiling.Wait()
}
