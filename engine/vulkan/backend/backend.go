// Package backend plugs the Vulkan resident driver into engine.Load: it plans the model on the
// chosen device (engine/plan) and, when the plan arms, uploads it and hands the engine a
// model.Runner. It is its own package because the plan's device adapter imports
// engine/vulkan; importing it (blank) from the binary registers the backend.
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/vulkan"
)

func init() { engine.RegisterGPUBackend("vulkan", New) }

// New is the engine.GPUBackend of the Vulkan resident driver. It declines (an error wrapping
// engine.ErrGPUDeclined) when there is no Vulkan device, the model is outside what the driver
// runs, or the resident plan declines; it fails only when an armed upload goes wrong.
func New(ctx context.Context, f *gguf.File, m *model.Model, opts engine.LoadOptions) (engine.GPURunner, error) {
	if err := vulkan.CheckModel(m); err != nil {
		return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
	}
	devs, err := vulkan.Devices()
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
	}
	dev, err := vulkan.ChooseDevice(devs, opts.DeviceIndex)
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
	}
	// The per-machine pin from the store is not consulted here (the engine has no store);
	// VKLLM_GPU_VRAM_MB applies through planinput.
	p, err := planinput.ForDevice(f, dev, 0, opts.Context, false)
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("plan %s on %s: %w", f.Path, dev.Name, err)
	}
	p.Log(ctx, slog.Default())
	if !p.Verdict.Armed {
		return engine.GPURunner{}, fmt.Errorf("%w: %s", engine.ErrGPUDeclined, p.Verdict.Text)
	}
	c, err := vulkan.Open(vulkan.Options{Device: dev.Index})
	if err != nil {
		return engine.GPURunner{}, fmt.Errorf("open Vulkan device %d: %w", dev.Index, err)
	}
	r, err := vulkan.NewResident(c, m, vulkan.ResidentOptions{Context: p.Ctx.Chosen, OwnContext: true})
	if err != nil {
		c.Close()
		if errors.Is(err, vulkan.ErrUnsupported) || errors.Is(err, vulkan.ErrTooLarge) {
			return engine.GPURunner{}, fmt.Errorf("%w: %v", engine.ErrGPUDeclined, err)
		}
		return engine.GPURunner{}, fmt.Errorf("upload %s to %s: %w", f.Path, dev.Name, err)
	}
	return engine.GPURunner{Runner: r, Backend: "vulkan", Placement: "resident", Context: r.Context()}, nil
}
