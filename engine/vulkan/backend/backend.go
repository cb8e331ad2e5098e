// Package backend plugs the Vulkan drivers into engine.Load: it plans the model on the chosen
// device (engine/plan) and, when the plan arms, uploads the whole model and hands the engine
// the resident runner; when the plan declines but its split puts some layers on the GPU, it
// hands the engine the split runner (those layers on the device, the rest on the CPU). It is
// its own package because the plan's device adapter imports engine/vulkan; importing it
// (blank) from the binary registers the backend.
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/vulkan"
)

func init() {
	engine.RegisterGPUBackend("vulkan", New)
	// The process's Vulkan instance (shared by every later Devices and Open) is created while
	// the engine reads the model; an error here is met again, and reported, by New.
	engine.RegisterGPUPrepare(func() { vulkan.Devices() })
}

// New is the engine.GPUBackend of the Vulkan drivers. It declines (an error wrapping
// engine.ErrGPUDeclined) when there is no Vulkan device, the model is outside what the driver
// runs, or the resident plan declines and its split has no layer on the GPU; it fails only
// when an upload the plan chose goes wrong. A declined plan (or VKLLM_GPU_RESIDENT=0) with
// GPU layers in its split runs split, placement "split k of L".
func New(ctx context.Context, f *gguf.File, m *model.Model, opts engine.LoadOptions) (engine.GPURunner, error) {
	if err := vulkan.CheckModel(m); err != nil {
		return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
	}
	started := time.Now()
	devs, err := vulkan.Devices()
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
	}
	dev, err := vulkan.ChooseDevice(devs, opts.DeviceIndex)
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
	}
	// The per-machine pin comes from the caller (the engine has no store); VKLLM_GPU_VRAM_MB
	// wins over it inside planinput.
	stored := 0
	if opts.StoredPinMB != nil {
		stored = opts.StoredPinMB(ctx, dev.Key())
	}
	if mb := config.GPUVRAMMB.Int(); config.GPUVRAMMB.Set() && mb > 0 {
		if heap := dev.LargestDeviceLocalHeap() >> 20; heap > 0 && uint64(mb) > heap {
			slog.Warn(config.GPUVRAMMB.Name+" pins more than the GPU has: the upload may run out of memory or spill to system memory",
				"pin_mb", mb, "device", dev.Name, "heap_mb", heap, "remedy", fmt.Sprintf("pin at most %d", heap))
		}
	}
	enumerated := time.Now()
	p, err := planinput.ForDevice(f, dev, stored, opts.Context, false)
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("plan %s on %s: %w", f.Path, dev.Name, err)
	}
	p.Log(ctx, slog.Default())
	if !p.Verdict.Armed {
		if len(m.Hyper.Recurrent) > 0 {
			// the split runner hands hidden states across and cannot rewind a recurrent state
			return engine.GPURunner{}, fmt.Errorf("%w: %s; architecture %q has recurrent (Gated DeltaNet) layers, which run resident or on the CPU, never split", engine.ErrGPUDeclined, p.Verdict.Text, m.Hyper.Arch)
		}
		if p.Split == nil || p.Split.GPULayers == 0 {
			return engine.GPURunner{}, fmt.Errorf("%w: %s", engine.ErrGPUDeclined, p.Verdict.Text)
		}
		return newSplit(p, dev, m, f.Path, opts.Threads)
	}
	planned := time.Now()
	c, err := vulkan.Open(vulkan.Options{Device: dev.Index})
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("open Vulkan device %d: %w", dev.Index, err)
	}
	opened := time.Now()
	slog.Debug("vulkan device opened", "device", dev.Name, "enumerate_ms", enumerated.Sub(started).Milliseconds(),
		"plan_ms", planned.Sub(enumerated).Milliseconds(), "open_ms", opened.Sub(planned).Milliseconds())
	setup := enumerated.Sub(started) + opened.Sub(planned)
	r, err := vulkan.NewResident(c, m, vulkan.ResidentOptions{Context: p.Ctx.Chosen, OwnContext: true, AfterWarmup: spillCheck(p)})
	if err != nil {
		c.Close() // NewResident freed what it had uploaded
		switch {
		case errors.Is(err, vulkan.ErrUnsupported) || errors.Is(err, vulkan.ErrTooLarge):
			return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
		case errors.Is(err, vulkan.ErrOutOfMemory):
			// The plan armed but the driver had less room than it said: first a split that
			// leaves a quarter of the weights on the CPU; if that has no GPU layer or runs out
			// too, auto mode serves on the CPU (engine.Load) and a forced --gpu fails with this
			// sentence.
			need := p.Weights.Bytes + p.KVBytes + p.Scratch.Total
			if sp, ok := smallerSplit(f, dev, p, need-p.Weights.Bytes/4); ok && len(m.Hyper.Recurrent) == 0 {
				slog.Warn("GPU out of memory during the upload; retrying as a partial offload with a quarter of the weights on the CPU",
					"device", dev.Name, "planned_mb", plan.MBUp(need), "gpu_layers", sp.Split.GPULayers, "layers", sp.Split.Layers, "err", err)
				gr, serr := newSplit(sp, dev, m, f.Path, opts.Threads)
				if serr == nil {
					return gr, nil
				}
				slog.Warn("the partial offload ran out too", "device", dev.Name, "err", serr)
			}
			slog.Warn("GPU out of memory during the upload; the model runs elsewhere", "device", dev.Name, "err", err)
			return engine.GPURunner{}, fmt.Errorf("%w: %s ran out of memory uploading the model (%d MB planned; %v); pin less VRAM (VKLLM_GPU_VRAM_MB or vkllm pin set) or close what else uses the GPU",
				engine.ErrGPUDeclined, dev.Name, plan.MBUp(p.Weights.Bytes+p.KVBytes+p.Scratch.Total), err)
		}
		return engine.GPURunner{}, fmt.Errorf("upload %s to %s: %w", f.Path, dev.Name, err)
	}
	return engine.GPURunner{Runner: r, Backend: "vulkan", Placement: "resident", Context: r.Context(), GPUSetup: setup}, nil
}

// smallerSplit is the plan of a partial offload within bytes on dev, at the context the armed
// plan p chose, and whether it puts any layer on the GPU: the retry after an upload ran out of
// memory. It pins the room like --vram-mb, so a VKLLM_GPU_VRAM_MB that overstated it does not
// apply again.
func smallerSplit(f *gguf.File, dev vulkan.DeviceInfo, p plan.Plan, bytes int64) (plan.Plan, bool) {
	mb := plan.MBDown(bytes)
	if mb <= 0 {
		return plan.Plan{}, false
	}
	in, err := planinput.Input(f, planinput.DeviceOf(dev), plan.Pin{MB: int(mb), Source: plan.PinFlag}, planinput.Ctx(p.Ctx.Chosen, true))
	if err != nil {
		return plan.Plan{}, false
	}
	in.ForceSplit = true
	sp := plan.Compute(in)
	return sp, sp.Split != nil && sp.Split.GPULayers > 0
}

// newSplit runs the plan's split: its GPU layers (the last ones) and, where the plan put it
// there, the output head resident on dev; the other layers on the CPU.
func newSplit(p plan.Plan, dev vulkan.DeviceInfo, m *model.Model, path string, threads int) (engine.GPURunner, error) {
	sp := p.Split
	slog.Info(sp.Text(), "reason", p.Verdict.Text, "first_gpu_layer", sp.FirstGPULayer, "output_on_gpu", sp.OutputOnGPU,
		"gpu_mb", plan.MBUp(sp.GPUBytes), "ctx", sp.Ctx)
	c, err := vulkan.Open(vulkan.Options{Device: dev.Index})
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("open Vulkan device %d: %w", dev.Index, err)
	}
	s, err := vulkan.NewSplit(c, m, vulkan.SplitOptions{
		Context: sp.Ctx, FirstGPULayer: sp.FirstGPULayer, HeadOnGPU: sp.OutputOnGPU,
		OwnContext: true, Threads: threads, AfterWarmup: spillCheck(p),
	})
	if err != nil {
		c.Close()
		if errors.Is(err, vulkan.ErrUnsupported) || errors.Is(err, vulkan.ErrTooLarge) {
			return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
		}
		return engine.GPURunner{}, fmt.Errorf("upload %d layers of %s to %s: %w", sp.GPULayers, path, dev.Name, err)
	}
	return engine.GPURunner{Runner: s, Backend: "vulkan", Placement: Placement(sp), Context: s.Context()}, nil
}

// Placement is the split's ModelInfo.Placement: "split k of L".
func Placement(sp *plan.Split) string {
	return fmt.Sprintf("split %d of %d", sp.GPULayers, sp.Layers)
}

// spillCheck is the warm-up hook of a runner planned by p: once every resident buffer exists
// and has been touched, the driver re-reads its device's budget and usage, and when the
// process spilled past the budget this warns once through slog, with a smaller pin as the
// remedy (a spill silently slows decode on some drivers).
func spillCheck(p plan.Plan) func(after vulkan.DeviceInfo) {
	return func(after vulkan.DeviceInfo) {
		if msg, ok := plan.SpillWarning(p, planinput.DeviceOf(after)); ok {
			slog.Warn(msg, "device", after.Name)
		}
	}
}
