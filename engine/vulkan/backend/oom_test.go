package backend

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/vulkan"
)

// A plan that arms but a driver that runs out of memory halfway through the upload: auto mode
// frees what was uploaded and serves on the CPU, saying why in the header's sentence; --gpu
// fails with the same cause. The fault hits the Nth buffer, so some of the model is already
// uploaded when it strikes.
func TestOutOfMemoryDuringTheUploadFallsBackToTheCPUInAutoMode(t *testing.T) {
	vulkanOrSkip(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024") // arms
	path := filepath.Join(sharedDir, "models", "stories260K.gguf")
	// How many buffers a good load makes: the one half way then fails, after the weights
	// uploaded before it.
	var total atomic.Int64
	prev := vulkan.SetAllocFault(func(uint64) error { total.Add(1); return nil })
	e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, DeviceIndex: -1, Context: testCtx})
	vulkan.SetAllocFault(prev)
	if err != nil {
		t.Skipf("shared model not available: %v", err)
	}
	if info := e.Info(); info.Placement != "resident" {
		e.Close()
		t.Fatalf("with no fault the model is %q, want resident (the pin should arm)", info.Placement)
	}
	e.Close()
	if total.Load() < 2 {
		t.Fatalf("a load made %d buffers; the test needs two to fail one mid-upload", total.Load())
	}
	for _, tc := range []struct {
		name    string
		backend engine.Backend
		failAt  int64
	}{
		{"auto/first allocation", engine.BackendAuto, 1},
		{"auto/mid upload", engine.BackendAuto, total.Load() / 2},
		{"gpu forced", engine.BackendGPU, total.Load() / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			prev := vulkan.SetAllocFault(func(bytes uint64) error {
				if n.Add(1) >= tc.failAt {
					return fmt.Errorf("simulated: %w", vulkan.ErrOutOfMemory)
				}
				return nil
			})
			defer vulkan.SetAllocFault(prev)
			e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, DeviceIndex: -1, Context: testCtx, Backend: tc.backend})
			if tc.backend == engine.BackendGPU {
				if err == nil {
					e.Close()
					t.Fatal("--gpu loaded although every upload ran out of memory")
				}
				if !strings.Contains(err.Error(), "ran out of memory uploading the model") || !strings.Contains(err.Error(), "pin less VRAM") {
					t.Fatalf("--gpu error %q does not name the cause and the remedy", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("auto mode failed instead of serving on the CPU: %v", err)
			}
			defer e.Close()
			info := e.Info()
			if info.Backend != "cpu" || info.Placement != "cpu" {
				t.Fatalf("backend %q placement %q, want the CPU", info.Backend, info.Placement)
			}
			if !strings.HasPrefix(info.CPUReason, "On the CPU: ") || !strings.Contains(info.CPUReason, "ran out of memory uploading the model") {
				t.Fatalf("CPU reason %q does not say the GPU ran out of memory", info.CPUReason)
			}
			if n.Load() < tc.failAt {
				t.Fatalf("the fault was asked %d times, never reaching allocation %d: the upload did not run", n.Load(), tc.failAt)
			}
		})
	}
}

// A VKLLM_GPU_VRAM_MB over the device's largest heap is warned about, naming the real heap.
func TestOverLargeVRAMPinWarnsWithTheRealHeap(t *testing.T) {
	vulkanOrSkip(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_VRAM_MB", "99999999")
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prev)
	f, m := openModel(t)
	gr, err := New(context.Background(), f, m, engine.LoadOptions{DeviceIndex: -1, Context: testCtx})
	if err == nil {
		gr.Runner.Close()
	}
	devs, derr := vulkan.Devices()
	if derr != nil {
		t.Fatal(derr)
	}
	dev, derr := vulkan.ChooseDevice(devs, -1)
	if derr != nil {
		t.Fatal(derr)
	}
	heap := dev.LargestDeviceLocalHeap() >> 20
	for _, want := range []string{"VKLLM_GPU_VRAM_MB pins more than the GPU has", "pin_mb=99999999", fmt.Sprintf("remedy=\"pin at most %d\"", heap)} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// A driver that runs out of memory once, halfway through an armed upload: the load retries as
// a partial offload with a quarter of the weights on the CPU and serves split, on the GPU.
func TestOutOfMemoryOnceRetriesAsASmallerSplit(t *testing.T) {
	vulkanOrSkip(t)
	t.Setenv("VKLLM_DEVICE", "")
	t.Setenv("VKLLM_GPU_RESIDENT", "")
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024") // arms
	path := filepath.Join(sharedDir, "models", "rand-llama-f32.gguf")
	var total atomic.Int64
	prev := vulkan.SetAllocFault(func(uint64) error { total.Add(1); return nil })
	e, err := engine.Load(context.Background(), engine.LoadOptions{Path: path, DeviceIndex: -1, Context: testCtx})
	vulkan.SetAllocFault(prev)
	if err != nil {
		t.Skipf("shared model not available: %v", err)
	}
	e.Close()
	var logs bytes.Buffer
	prevLog := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(prevLog)
	var n atomic.Int64
	failAt := max(1, total.Load()/2)
	prev = vulkan.SetAllocFault(func(uint64) error {
		if n.Add(1) == failAt {
			return fmt.Errorf("simulated: %w", vulkan.ErrOutOfMemory)
		}
		return nil
	})
	defer vulkan.SetAllocFault(prev)
	e, err = engine.Load(context.Background(), engine.LoadOptions{Path: path, DeviceIndex: -1, Context: testCtx, Backend: engine.BackendGPU})
	if err != nil {
		t.Fatalf("--gpu failed although only one allocation ran out: %v\n%s", err, logs.String())
	}
	defer e.Close()
	info := e.Info()
	if info.Backend != "vulkan" || !strings.HasPrefix(info.Placement, "split ") {
		t.Fatalf("backend %q placement %q, want a split on vulkan", info.Backend, info.Placement)
	}
	if !strings.Contains(logs.String(), "retrying as a partial offload with a quarter of the weights on the CPU") {
		t.Fatalf("the retry is not logged:\n%s", logs.String())
	}
	t.Logf("placement %s after one failed allocation of %d", info.Placement, total.Load())
}
