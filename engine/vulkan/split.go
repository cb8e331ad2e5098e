package vulkan

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/vkllm/vkllm/engine/cpu"
	"github.com/vkllm/vkllm/engine/model"
)

// SplitOptions places a model across the CPU and the device, as the plan's split chose.
type SplitOptions struct {
	Context int // positions of both KV caches; 0: the model's context length
	// FirstGPULayer is the first of the layers the device runs (the last ones, so the hidden
	// state crosses from the CPU once per evaluation); it must be below the layer count.
	FirstGPULayer int
	// HeadOnGPU puts the final norm and the output head on the device too.
	HeadOnGPU bool
	// OwnContext makes Close also close the Context.
	OwnContext bool
	// Window is the most rows one device prefill pass takes; 0: the package Window (512).
	Window int
	// Threads is the CPU side's worker count; 0: one per CPU.
	Threads int
	// AfterWarmup is called once, after the first decode pass, with the device re-read.
	AfterWarmup func(after DeviceInfo)
}

// Split is the partial-offload forward pass: the token embedding and layers 0..FirstGPULayer-1
// run on the CPU, the remaining layers (with their KV cache, and the output head when it
// fits) resident on the device; every evaluation hands the hidden states across once, and
// back once more when the head stays on the CPU. The CPU side is the reference runner of
// engine/cpu (its EvalLayers and Head), so the first layers' numerics are the CPU path's own.
// It implements model.Runner and is not safe for concurrent use.
type Split struct {
	host   *cpu.Runner // the embedding, layers 0..first-1 and their KV cache, the head when the device lacks it
	first  int         // FirstGPULayer
	dev    *Resident
	h      model.Hyperparameters
	ctxLen int
	warmed bool
	warmup func(after DeviceInfo)
	closed bool
}

// NewSplit builds the split runner of m: it uploads the device's layers and sizes the CPU's
// KV cache for the others.
func NewSplit(c *Context, m *model.Model, opts SplitOptions) (*Split, error) {
	h := m.Hyper
	if opts.FirstGPULayer < 0 || opts.FirstGPULayer >= h.Layers {
		return nil, fmt.Errorf("split: first GPU layer %d outside the model's %d layers (the device must run at least one)", opts.FirstGPULayer, h.Layers)
	}
	ctxLen := opts.Context
	if ctxLen <= 0 {
		ctxLen = h.ContextLength
	}
	host, err := cpu.New(m, cpu.Options{Threads: opts.Threads, Context: ctxLen})
	if err != nil {
		return nil, fmt.Errorf("split: %w", err)
	}
	dev, err := NewResident(c, m, ResidentOptions{
		Context: ctxLen, OwnContext: opts.OwnContext, Window: opts.Window,
		Part: &Part{FirstLayer: opts.FirstGPULayer, Head: opts.HeadOnGPU},
	})
	if err != nil {
		host.Close()
		return nil, fmt.Errorf("split: %w", err)
	}
	s := &Split{host: host, first: opts.FirstGPULayer, dev: dev, h: h, ctxLen: ctxLen, warmup: opts.AfterWarmup}
	slog.Info("vulkan split driver ready", "gpu_layers", h.Layers-opts.FirstGPULayer, "layers", h.Layers,
		"first_gpu_layer", opts.FirstGPULayer, "head_on_gpu", opts.HeadOnGPU, "ctx", ctxLen)
	return s, nil
}

// Eval runs tokens at positions pos.. and returns the last token's logits, or every token's
// when wantAllLogits. The CPU layers run first, a window of rows at a time, then the device
// layers on the same rows.
func (s *Split) Eval(tokens []int, pos int, wantAllLogits bool) ([]float32, error) {
	if s.closed {
		return nil, errors.New("split eval: runner is closed")
	}
	if len(tokens) == 0 {
		return nil, errors.New("split eval: no tokens")
	}
	if pos < 0 || pos+len(tokens) > s.ctxLen {
		return nil, fmt.Errorf("split eval: positions %d..%d outside the context of %d", pos, pos+len(tokens)-1, s.ctxLen)
	}
	for i, t := range tokens {
		if t < 0 || t >= s.h.VocabSize {
			return nil, fmt.Errorf("split eval: token %d at index %d outside the vocabulary of %d", t, i, s.h.VocabSize)
		}
	}
	var out []float32
	for start := 0; start < len(tokens); {
		n := min(s.dev.rows, len(tokens)-start)
		last := start+n == len(tokens)
		x, err := s.host.EvalLayers(tokens[start:start+n], pos+start, s.first)
		if err != nil {
			return nil, fmt.Errorf("split eval: %w", err)
		}
		y, err := s.dev.EvalHidden(x, n, pos+start, wantAllLogits)
		if err != nil {
			return nil, fmt.Errorf("split eval: %w", err)
		}
		if !s.dev.hasHead {
			switch {
			case wantAllLogits:
				y, err = s.host.Head(y)
			case last:
				y, err = s.host.Head(y[(n-1)*s.h.Dim:])
			default:
				y = nil
			}
			if err != nil {
				return nil, fmt.Errorf("split eval: %w", err)
			}
		}
		if wantAllLogits {
			out = append(out, y...)
		} else if last {
			out = y
		}
		start += n
	}
	if len(tokens) == 1 && !s.warmed {
		s.warmed = true
		warmedUp(s.dev.c, s.warmup)
	}
	return out, nil
}

// Bytes is what the device side allocated.
func (s *Split) Bytes() ResidentBytes { return s.dev.Bytes }

// Reset forgets the cached positions.
func (s *Split) Reset() {
	if !s.closed {
		s.host.Reset()
	}
}

// Name identifies the runner.
func (s *Split) Name() string { return "vulkan-split:" + s.dev.c.Info.Name }

// Context returns the positions the KV caches hold.
func (s *Split) Context() int { return s.ctxLen }

// Close stops the CPU side's workers and frees the device side (and its Context when owned).
func (s *Split) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.host.Close()
	return s.dev.Close()
}

var _ model.Runner = (*Split)(nil)
