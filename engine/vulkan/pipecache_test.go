package vulkan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	vk "github.com/vulkan-go/vulkan"
)

// openCached opens a second context (beside the package's shared one) with its pipeline cache
// in dir, skipping where there is no Vulkan.
func openCached(t *testing.T, dir string) *Context {
	t.Helper()
	c, err := Open(Options{Device: -1, Quiet: true, PipelineCacheDir: dir})
	if errors.Is(err, ErrNoLoader) || errors.Is(err, ErrNoDevice) {
		t.Skipf("no Vulkan here: %v", err)
	}
	if err != nil {
		t.Fatalf("open Vulkan context: %v", err)
	}
	return c
}

// fillWorks compiles the fill kernel on c and checks what it writes.
func fillWorks(t *testing.T, c *Context) {
	t.Helper()
	const n = 100
	buf, err := c.NewBuffer(4*n, false)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	k, err := c.Kernel("fill", 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSeq()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	s.Dispatch(k, Push(uint32(n), float32(2)), (n+63)/64, 1, 1, buf.All())
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	raw, err := buf.Read(0, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != 2+float32(i) {
			t.Fatalf("element %d: got %v, want %v", i, got, 2+float32(i))
		}
	}
}

// A context saves the pipelines it compiled into its GPU's cache file on Close; the next
// context starts from that file and leaves it alone when it compiles nothing new; a file
// whose header names another device, or a truncated one, is ignored and the kernels still
// compile and run.
func TestPipelineCacheCarriesCompiledKernelsToTheNextContext(t *testing.T) {
	dir := t.TempDir()
	c1 := openCached(t, dir)
	path := c1.pipelineCacheFile(dir)
	fillWorks(t, c1)
	var props vk.PhysicalDeviceProperties
	vk.GetPhysicalDeviceProperties(c1.physical, &props)
	props.Deref()
	c1.Close()
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no cache file after Close: %v", err)
	}
	if !cacheHeaderOK(saved, props.VendorID, props.DeviceID, props.PipelineCacheUUID) {
		t.Fatalf("saved cache (%d bytes) does not start with this device's header", len(saved))
	}

	c2 := openCached(t, dir)
	if c2.pcacheLoaded != len(saved) {
		t.Errorf("second context seeded with %d bytes, want the file's %d", c2.pcacheLoaded, len(saved))
	}
	fillWorks(t, c2)
	c2.Close()
	if again, err := os.ReadFile(path); err != nil || !bytes.Equal(again, saved) {
		t.Errorf("a context that compiled nothing new rewrote the cache (err %v)", err)
	}

	foreign := append([]byte(nil), saved...)
	binary.LittleEndian.PutUint32(foreign[8:], props.VendorID+1)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"another vendor's header", foreign},
		{"truncated", saved[:10]},
		{"garbage", bytes.Repeat([]byte{0xA5}, 4096)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			c := openCached(t, dir)
			defer c.Close()
			if c.pcacheLoaded != 0 {
				t.Errorf("seeded with %d bytes of a file that is not this device's", c.pcacheLoaded)
			}
			fillWorks(t, c)
		})
	}
}

// "off" (or VKLLM_PIPELINE_CACHE=off) runs without a cache; a cache directory that cannot be
// created costs the save, never the context.
func TestPipelineCacheOffAndUnwritableDirectory(t *testing.T) {
	t.Setenv("VKLLM_PIPELINE_CACHE", "off")
	c := openCached(t, "")
	if c.pcache != vk.NullPipelineCache {
		t.Error("VKLLM_PIPELINE_CACHE=off still created a pipeline cache")
	}
	fillWorks(t, c)
	c.Close()

	blocker := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(blocker, "cache") // under a regular file: MkdirAll fails
	c = openCached(t, dir)
	fillWorks(t, c)
	c.Close() // logs a warning with the remedy
	if _, err := os.Stat(dir); err == nil {
		t.Error("a cache directory appeared under a regular file")
	}
}
