package vulkan

import (
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// Kernel may be asked for one kernel by several goroutines at once (precompile's workers beside
// a recording): each gets the same pipeline, made once, and nothing is left marked as being made.
func TestKernelMadeOnceUnderConcurrentAsks(t *testing.T) {
	c := ctxOrSkip(t)
	forgetKernels(c, "pack_f16")
	const askers = 8
	got := make([]*Kernel, askers)
	var wg sync.WaitGroup
	for i := range askers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := c.Kernel("pack_f16", 2, 16)
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		}()
	}
	wg.Wait()
	for i, k := range got {
		if k == nil || k != got[0] || k != c.kernels["pack_f16"] {
			t.Fatalf("asker %d got pipeline %p, asker 0 %p, the context holds %p", i, k, got[0], c.kernels["pack_f16"])
		}
	}
	if len(c.making) != 0 {
		t.Fatalf("%d kernels still marked as being made: %v", len(c.making), slices.Collect(maps.Keys(c.making)))
	}
	if _, err := c.Kernel("pack_f16", 3, 16); err == nil {
		t.Fatal("a kernel asked with other bindings than it was made with was not refused")
	}
}

// precompile makes exactly the kernels not yet made, on several goroutines, and stops when
// asked; the decode step's dry recording asks for every kernel its real recording uses.
func TestPrecompileMakesTheDecodeStepsKernelsAhead(t *testing.T) {
	c := ctxOrSkip(t)
	m := modeltest.Load(t, modeltest.TinySynth(t, "", "llama", quant.Q8_0, 7))
	r, err := NewResident(c, m, ResidentOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	wants := r.wantsKernels(0, r.recordStep)
	if len(wants) < 5 {
		t.Fatalf("the decode step's dry recording asked for %d kernels: %v", len(wants), wants)
	}
	names := slices.Sorted(maps.Keys(wants))
	forgetKernels(c, names...)
	if n := c.precompile(wants, 4, func() bool { return true }); n != 0 {
		t.Fatalf("precompile asked to stop made %d kernels", n)
	}
	if n := c.precompile(wants, 4, nil); n != len(wants) {
		t.Fatalf("precompile made %d of the %d kernels none of which was made", n, len(wants))
	}
	for _, name := range names {
		if _, ok := c.kernels[name]; !ok {
			t.Fatalf("kernel %s not made", name)
		}
	}
	if n := c.precompile(wants, 4, nil); n != 0 {
		t.Fatalf("precompile made %d kernels again", n)
	}
	// the real recording asks for nothing the dry one did not
	before := slices.Sorted(maps.Keys(c.kernels))
	recorded := r.decode
	if err := r.recordDecode(); err != nil {
		t.Fatal(err)
	}
	recorded.Free() // the load's, replaced
	if after := slices.Sorted(maps.Keys(c.kernels)); !slices.Equal(before, after) {
		t.Fatalf("recording the decode step made kernels its dry recording did not ask for: %v, then %v", before, after)
	}
}

// With the windows' kernels made ahead (on for GPUs; off on lavapipe and for the package's other
// tests, turned on here), a resident model makes its prompt windows' kernels in the background
// after the load: once that is done, a full window and a two-row one make no kernel of their
// own. Unplugged, they would make the kernels forgotten before the load.
func TestResidentMakesItsPromptWindowsKernelsAfterTheLoad(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(prev bool) { c.windowsAhead = prev }(c.windowsAhead)
	c.windowsAhead = true
	m := modeltest.Load(t, modeltest.TinySynth(t, "", "llama", quant.Q8_0, 7))
	probe, err := NewResident(c, m, ResidentOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	probe.stopPrecompile()
	wants := probe.windowKernels(probe.rows)
	maps.Copy(wants, probe.windowKernels(2))
	probe.Close()
	forgetKernels(c, slices.Collect(maps.Keys(wants))...)

	r, err := NewResident(c, m, ResidentOptions{Context: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.precompiling.Wait()
	for name := range wants {
		if _, ok := c.kernels[name]; !ok {
			t.Fatalf("prompt window kernel %s not made in the background", name)
		}
	}
	before := slices.Sorted(maps.Keys(c.kernels))
	prompt := make([]int, r.rows)
	for i := range prompt {
		prompt[i] = 1 + i%200
	}
	if _, err := r.Eval(prompt, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Eval(prompt[:2], 0, false); err != nil {
		t.Fatal(err)
	}
	if after := slices.Sorted(maps.Keys(c.kernels)); !slices.Equal(before, after) {
		t.Fatalf("prompt windows made kernels of their own after the background precompile: %d kernels before, %d after", len(before), len(after))
	}
}
