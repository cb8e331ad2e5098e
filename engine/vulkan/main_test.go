package vulkan

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"time"
)

// The package's tests share one context: device creation costs more than most kernel tests.
// It runs with the validation layer when installed, and TestMain fails the run if the layer
// reported any error.
var (
	testCtxOnce sync.Once
	testCtx     *Context
	testCtxErr  error
)

func ctxOrSkip(t testing.TB) *Context {
	t.Helper()
	testCtxOnce.Do(func() {
		testCtx, testCtxErr = Open(Options{Device: -1, Validate: true, Quiet: true})
		if testCtxErr == nil {
			// the tests check which kernels a recording makes: no prompt window's kernels
			// made in the background beside them (precompile_test.go turns it on)
			testCtx.windowsAhead = false
		}
	})
	if errors.Is(testCtxErr, ErrNoLoader) || errors.Is(testCtxErr, ErrNoDevice) {
		t.Skipf("no Vulkan here: %v", testCtxErr)
	}
	if testCtxErr != nil {
		t.Fatalf("open Vulkan context: %v", testCtxErr)
	}
	return testCtx
}

// gpuCtxOrSkip is ctxOrSkip for a benchmark that times kernels: it also skips on a CPU device
// (lavapipe), whose timings say nothing about a GPU.
func gpuCtxOrSkip(b *testing.B) *Context {
	b.Helper()
	c := ctxOrSkip(b)
	if c.Info.Type == "cpu" {
		b.Skipf("%s is a CPU device: its timings say nothing about a GPU", c.Info.Name)
	}
	return c
}

// benchBuffer uploads data to a device buffer freed when the benchmark ends.
func benchBuffer(b *testing.B, c *Context, data []byte) *Buffer {
	b.Helper()
	bb, err := c.NewBuffer(uint64(len(data)), false)
	if err != nil {
		b.Fatal(err)
	}
	if err := bb.Write(0, data); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bb.Free)
	return bb
}

// bestNsPerRep records reps passes of record between two timestamps and returns the best
// nanoseconds per pass over b.N submits after a warm-up submit: GPU time from the timestamps,
// wall time where the queue has none.
func bestNsPerRep(b *testing.B, c *Context, reps int, record func(s *Seq)) float64 {
	b.Helper()
	s, err := c.NewSeq()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Free()
	if err := s.EnableTimestamps(2); err != nil {
		b.Fatal(err)
	}
	s.Stamp("start")
	for i := 0; i < reps; i++ {
		record(s)
		s.Barrier()
	}
	s.Stamp("passes")
	best := math.Inf(1)
	for i := 0; i < b.N+1; i++ { // the first submit warms the pipelines
		start := time.Now()
		if err := s.Run(); err != nil {
			b.Fatal(err)
		}
		wall := float64(time.Since(start).Nanoseconds())
		tm, err := s.Timings()
		if err != nil {
			b.Fatal(err)
		}
		ns, ok := tm["passes"]
		if !ok {
			ns = wall
		}
		if i > 0 {
			best = math.Min(best, ns/float64(reps))
		}
	}
	return best
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testCtx != nil {
		n, last, active := testCtx.ValidationErrors()
		testCtx.Close()
		if active {
			fmt.Printf("vulkan validation layer: %d errors\n", n)
		} else {
			fmt.Println("vulkan validation layer: not installed, not checked")
		}
		if n > 0 {
			fmt.Printf("last validation error: %s\n", last)
			code = 1
		}
	}
	os.Exit(code)
}

// forgetKernels destroys the named pipelines earlier tests made, so that a test can check that
// what it runs makes them (Context.Kernel creates them on first use).
func forgetKernels(c *Context, names ...string) {
	c.kernelMu.Lock()
	defer c.kernelMu.Unlock()
	for _, k := range names {
		if kern, ok := c.kernels[k]; ok {
			kern.destroy(c.dev)
			delete(c.kernels, k)
		}
	}
}
