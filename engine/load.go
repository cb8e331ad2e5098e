package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkllm/vkllm/engine/chat"
	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/cpu"
	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/tokenizer"
)

// Engine is one loaded model with its tokenizer and forward pass. Generate calls are serialised:
// one generation runs at a time.
type Engine struct {
	file     *gguf.File
	model    *model.Model
	tok      *tokenizer.Tokenizer
	runner   model.Runner
	info     ModelInfo
	template string // tokenizer.chat_template, "" when the model has none

	templateOff atomic.Bool // the template reached a render limit: the plain format is used instead

	mu     sync.Mutex
	cached []int // the tokens whose keys and values are in the runner's cache, in order
}

// GPURunner is what a GPU backend hands back when it takes a model.
type GPURunner struct {
	Runner    model.Runner
	Backend   string // shown as ModelInfo.Backend, e.g. "vulkan"
	Placement string // shown as ModelInfo.Placement, e.g. "resident" or "split 22 of 32"
	Context   int    // positions the runner's KV cache holds
	// GPUSetup is the part of the load the backend spent waiting for the GPU's instance and
	// creating its device: fixed costs of a process, not of the model (ModelInfo.GPUSetup).
	GPUSetup time.Duration
}

// GPUBackend builds a GPU runner for an opened model. It returns an error wrapping
// ErrGPUDeclined when the model should run elsewhere (no usable device, the resident plan
// declined, ...); the error text is logged as the reason. Any other error fails the load.
type GPUBackend func(ctx context.Context, f *gguf.File, m *model.Model, opts LoadOptions) (GPURunner, error)

// ErrGPUDeclined marks a GPU backend's refusal to take a model (not a failure).
var ErrGPUDeclined = errors.New("gpu backend declined")

// The GPU seam. The engine package does not import the Vulkan code; the Vulkan package (or the
// binary's main package) registers its backend from an init function:
//
//	func init() { engine.RegisterGPUBackend("vulkan", newVulkanRunner) }
//
// Load then offers every model to it first under BackendAuto and BackendGPU.
var (
	gpuMu      sync.Mutex
	gpuName    string
	gpuBackend GPUBackend
	gpuPrepare func() // RegisterGPUPrepare; nil: none
)

// RegisterGPUBackend installs the GPU backend Load uses. A later registration replaces an
// earlier one.
func RegisterGPUBackend(name string, b GPUBackend) {
	gpuMu.Lock()
	defer gpuMu.Unlock()
	gpuName, gpuBackend = name, b
}

// RegisterGPUPrepare installs work Load starts in the background while it reads the model
// file, before it asks the GPU backend (the Vulkan backend creates its instance there: ~50 ms
// on an NVIDIA driver that the model's parse now hides).
func RegisterGPUPrepare(prepare func()) {
	gpuMu.Lock()
	defer gpuMu.Unlock()
	gpuPrepare = prepare
}

// GPUBackendName is the name of the GPU backend this binary registered ("vulkan" where it links
// engine/vulkan/backend), or "" when none is built in and every model runs on the CPU.
func GPUBackendName() string {
	name, b := registeredGPU()
	if b == nil {
		return ""
	}
	return name
}

func registeredGPU() (string, GPUBackend) {
	gpuMu.Lock()
	defer gpuMu.Unlock()
	return gpuName, gpuBackend
}

// Load opens a GGUF model (opts.Path, or the embedded default when empty), reads its
// tokenizer and weights, and sets up the forward pass on the chosen backend. BackendAuto tries
// the registered GPU backend and falls back to the CPU, logging why; BackendGPU fails instead.
func Load(ctx context.Context, opts LoadOptions) (*Engine, error) {
	if opts.Backend == "" {
		opts.Backend = BackendAuto
	}
	switch opts.Backend {
	case BackendAuto, BackendCPU, BackendGPU:
	default:
		return nil, fmt.Errorf("load model: backend %q is unknown (want auto, cpu or gpu)", opts.Backend)
	}
	switch {
	case opts.Threads < 0:
		return nil, fmt.Errorf("load model: threads %d is negative: want 0 (every core) or more", opts.Threads)
	case opts.DeviceIndex < -1:
		return nil, fmt.Errorf("load model: device %d is out of range: want a Vulkan device index from `vkllm devices`, or -1 to choose", opts.DeviceIndex)
	case opts.Context < 0:
		return nil, fmt.Errorf("load model: context %d is negative: want 0 (the model's own) or more", opts.Context)
	}
	if err := checkKV(opts.KV, opts.Backend); err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	if opts.Threads == 0 {
		opts.Threads = config.Threads.Int()
	}
	var (
		f   *gguf.File
		err error
	)
	if opts.Path == "" {
		f, err = gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	} else {
		f, err = gguf.Open(opts.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	e, err := build(ctx, f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("load model %s: %w", f.Path, err)
	}
	return e, nil
}

func build(ctx context.Context, f *gguf.File, opts LoadOptions) (*Engine, error) {
	if opts.Backend != BackendCPU {
		gpuMu.Lock()
		prepare := gpuPrepare
		gpuMu.Unlock()
		if prepare != nil {
			go prepare()
			// The upload copies every tensor out of the mapping: fault its pages in on other
			// cores while the GPU's instance and device are being created.
			if config.LoadPrefault.Bool() {
				f.Prefault(min(8, max(1, runtime.NumCPU()-1)))
			}
		}
	}
	started := time.Now()
	m, err := model.Load(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	slog.Debug("model read", "model_and_tokenizer_ms", time.Since(started).Milliseconds())
	if tok.VocabSize() > m.Hyper.VocabSize {
		return nil, fmt.Errorf("tokenizer has %d tokens but token_embd.weight only %d rows", tok.VocabSize(), m.Hyper.VocabSize)
	}
	e := &Engine{file: f, model: m, tok: tok}
	e.template, _ = chat.Template(f)
	e.info = describe(f, m, opts.Path)

	reason := cpuReason(BackendCPU, true, "")
	if opts.Backend != BackendCPU {
		gr, ok, why, err := tryGPU(ctx, f, m, opts)
		if err != nil {
			return nil, err
		}
		if ok {
			e.runner = gr.Runner
			e.info.Backend, e.info.Placement, e.info.Context = gr.Backend, gr.Placement, gr.Context
			e.info.GPUSetup = gr.GPUSetup
			return e, nil
		}
		reason = why
	}
	r, err := cpu.New(m, cpu.Options{Threads: opts.Threads, Context: opts.Context, KV: cpu.KVType(opts.KV)})
	if err != nil {
		return nil, err
	}
	e.runner = r
	e.info.Backend, e.info.Placement, e.info.Context = "cpu", "cpu", r.Context()
	e.info.CPUReason = reason
	slog.Debug("cpu backend ready", "threads", r.Threads(), "ctx", r.Context(), "kv", kvName(opts.KV))
	return e, nil
}

// KVType is one KV cache element type a backend keeps.
type KVType struct {
	Name    string `json:"name"`     // the LoadOptions.KV value
	CPUOnly bool   `json:"cpu_only"` // the Vulkan drivers keep f16 only
}

// KVTypes are the KV cache types Load accepts: f16 everywhere (the default, llama.cpp's), f32
// on the CPU reference.
func KVTypes() []KVType {
	return []KVType{{Name: string(cpu.KVF16)}, {Name: string(cpu.KVF32), CPUOnly: true}}
}

// checkKV refuses a KV cache type the backend does not keep.
func checkKV(kv string, b Backend) error {
	for _, t := range KVTypes() {
		if kv != "" && kv != t.Name {
			continue
		}
		if t.CPUOnly && b != BackendCPU {
			return fmt.Errorf("KV cache type %s is kept by the CPU only; choose f16, or run on the CPU (--cpu)", kv)
		}
		return nil
	}
	return fmt.Errorf("KV cache type %q is unknown; want f16, or f32 on the CPU", kv)
}

func kvName(kv string) string {
	if kv == "" {
		return string(cpu.KVF16)
	}
	return kv
}

// tryGPU offers the model to the registered GPU backend. ok is false when the CPU should take
// it (auto mode only), and why then says so in a sentence for the user (ModelInfo.CPUReason);
// err is set when the load must fail.
func tryGPU(ctx context.Context, f *gguf.File, m *model.Model, opts LoadOptions) (gr GPURunner, ok bool, why string, err error) {
	name, b := registeredGPU()
	if b == nil {
		if opts.Backend == BackendGPU {
			return GPURunner{}, false, "", errors.New("no GPU backend is built into this binary; use --cpu")
		}
		slog.Info("running on the CPU", "reason", "no GPU backend is built into this binary")
		return GPURunner{}, false, cpuReason(opts.Backend, false, ""), nil
	}
	gr, err = b(ctx, f, m, opts)
	switch {
	case err == nil:
		if gr.Runner == nil {
			return GPURunner{}, false, "", fmt.Errorf("%s backend returned no runner", name)
		}
		if gr.Backend == "" {
			gr.Backend = name
		}
		return gr, true, "", nil
	case errors.Is(err, ErrGPUDeclined) && opts.Backend == BackendAuto:
		slog.Info("running on the CPU", "reason", err.Error(), "gpu_backend", name)
		return GPURunner{}, false, cpuReason(opts.Backend, true, err.Error()), nil
	default:
		return GPURunner{}, false, "", fmt.Errorf("%s backend: %w", name, err)
	}
}

// describe fills the ModelInfo fields that do not depend on the backend.
func describe(f *gguf.File, m *model.Model, path string) ModelInfo {
	info := ModelInfo{
		Name:          filepath.Base(path),
		Path:          path,
		Arch:          m.Hyper.Arch,
		Params:        m.Params(),
		FileSize:      f.Size,
		Quant:         dominantType(m).String(),
		ContextLength: m.Hyper.ContextLength,
		Layers:        m.Hyper.Layers,
		Dim:           m.Hyper.Dim,
		VocabSize:     m.Hyper.VocabSize,
	}
	if path == "" {
		info.Name = embedded.Name
	}
	_, info.HasTemplate = chat.Template(f)
	return info
}

// dominantType is the tensor type holding the most weight bytes among the layers' matrices.
func dominantType(m *model.Model) quant.Type {
	bytes := map[quant.Type]int{}
	for _, l := range m.Layers {
		for _, w := range l.Matrices() { // the experts of a mixture, the dense FFN otherwise
			bytes[w.Type] += len(w.Data)
		}
	}
	best, bestN := m.TokenEmbd.Type, -1
	for t, n := range bytes {
		if n > bestN || (n == bestN && t < best) {
			best, bestN = t, n
		}
	}
	return best
}

// Info describes the loaded model and where it runs.
func (e *Engine) Info() ModelInfo { return e.info }

// Runner is the forward pass in use (for the bench and for backend comparisons).
func (e *Engine) Runner() model.Runner { return e.runner }

// File is the opened GGUF.
func (e *Engine) File() *gguf.File { return e.file }

// Model is the model's hyperparameters and weight views.
func (e *Engine) Model() *model.Model { return e.model }

// Tokenizer is the model's tokenizer.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// Close releases the runner and the file mapping.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	if e.runner != nil {
		if err := e.runner.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s runner: %w", e.runner.Name(), err))
		}
		e.runner = nil
	}
	if e.file != nil {
		if err := e.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close model file: %w", err))
		}
		e.file = nil
	}
	return errors.Join(errs...)
}

// TrainingContext is the context a model file was trained for (its context_length), read
// without loading the model: path "" is the embedded model. A caller sizing a context from a
// user's numbers checks them against it before the load allocates for them.
func TrainingContext(path string) (int, error) {
	var (
		f   *gguf.File
		err error
	)
	if path == "" {
		f, err = gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	} else {
		f, err = gguf.Open(path)
	}
	if err != nil {
		return 0, fmt.Errorf("read training context: %w", err)
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		return 0, fmt.Errorf("read training context: %w", err)
	}
	return m.Hyper.ContextLength, nil
}
