// Package planinput turns a GGUF file, a Vulkan device and the VKLLM_* settings into the plain
// inputs of engine/plan. It is the adapter around the pure core: the core stays free of gguf,
// vulkan, the store and the environment (and so builds for WebAssembly); this package holds all
// of those.
package planinput

import (
	"fmt"
	"path/filepath"

	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/vulkan"
)

// TensorSpecs lists the file's tensors as the plan and the resident driver's upload both read
// them: plan.UploadList(TensorSpecs(f)) is the device layout.
func TensorSpecs(f *gguf.File) []plan.TensorSpec {
	out := make([]plan.TensorSpec, len(f.Tensors))
	for i, t := range f.Tensors {
		out[i] = plan.TensorSpec{Name: t.Name, Type: t.Type.String(), Dims: t.Dims, Size: t.Size}
	}
	return out
}

// Uploads is plan.UploadList(TensorSpecs(f)): the one list the plan sums and the driver uploads.
func Uploads(f *gguf.File) ([]plan.Upload, error) {
	ups, err := plan.UploadList(TensorSpecs(f))
	if err != nil {
		return nil, fmt.Errorf("lay out the tensors of %s: %w", f.Path, err)
	}
	return ups, nil
}

// ModelOf reads the shape the plan needs from {arch}.* metadata. It is lenient where the plan
// can be (head sizes default to dim/heads, KV heads to heads) and names the key when a needed
// one is missing.
func ModelOf(f *gguf.File) (plan.Model, error) {
	arch, ok := f.String("general.architecture")
	if !ok || arch == "" {
		return plan.Model{}, fmt.Errorf("model %s: metadata lacks general.architecture", f.Path)
	}
	m := plan.Model{Name: filepath.Base(f.Path), Arch: arch, HeaderOnly: !f.Complete()}
	if name, ok := f.String("general.name"); ok && m.Name == "." {
		m.Name = name
	}
	var err error
	get := func(k string, dst *int, def int, required bool) {
		if err != nil {
			return
		}
		key := arch + "." + k
		if v, ok := f.Uint(key); ok {
			if v > 1<<30 {
				err = fmt.Errorf("model %s: %s = %d is out of range", f.Path, key, v)
				return
			}
			*dst = int(v)
			return
		}
		if vs, ok := f.Int32s(key); ok && len(vs) > 0 { // per-layer arrays: plan for the largest
			for _, v := range vs {
				*dst = max(*dst, int(v))
			}
			return
		}
		if required {
			err = fmt.Errorf("model %s: metadata lacks %s", f.Path, key)
			return
		}
		*dst = def
	}
	get("embedding_length", &m.Embd, 0, true)
	get("block_count", &m.Layers, 0, true)
	get("attention.head_count", &m.Heads, 0, true)
	get("feed_forward_length", &m.FF, 4*m.Embd, false)
	get("attention.head_count_kv", &m.HeadsKV, m.Heads, false)
	get("context_length", &m.CtxLength, 0, false)
	if err != nil {
		return plan.Model{}, err
	}
	if m.Heads <= 0 {
		return plan.Model{}, fmt.Errorf("model %s: %s.attention.head_count is 0, want at least 1", f.Path, arch)
	}
	get("attention.key_length", &m.HeadDimK, m.Embd/m.Heads, false)
	get("attention.value_length", &m.HeadDimV, m.HeadDimK, false)
	get("expert_count", &m.Experts, 0, false)
	if m.Experts > 0 {
		// the defaults are model.Load's (llama.cpp's): expert width feed_forward_length/used
		get("expert_used_count", &m.ExpertsUsed, 1, false)
		get("expert_feed_forward_length", &m.ExpertFF, m.FF/max(m.ExpertsUsed, 1), false)
		if _, ok := f.Tensor("blk.0.ffn_up_shexp.weight"); ok {
			get("expert_shared_feed_forward_length", &m.SharedFF, m.FF, false)
		}
	}
	if err == nil && hybridArchs[arch] {
		if herr := hybridOf(f, &m, get); herr != nil && err == nil {
			err = herr
		}
	}
	if err != nil {
		return plan.Model{}, err
	}
	if t, ok := f.Tensor("token_embd.weight"); ok && len(t.Dims) >= 2 {
		m.Vocab = int(t.Dims[1])
	} else if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		m.Vocab = len(toks)
	}
	return m, err
}

// hybridArchs are the Gated-DeltaNet hybrids: most layers recurrent, every full_attention_interval-th
// one gated attention.
var hybridArchs = map[string]bool{"qwen35": true, "qwen35moe": true}

// hybridOf reads a hybrid's recurrent facts as llama.cpp does: the ssm.* sizes, and which layers
// are recurrent from attention.recurrent_layers when the file lists them, else every layer but each
// full_attention_interval-th (4 by default). A missing required key is reported through get's
// error, which the caller checks. Layers past block_count - nextn_predict_layers (the
// multi-token-prediction block) are attention.
func hybridOf(f *gguf.File, m *plan.Model, get func(k string, dst *int, def int, required bool)) error {
	arch := m.Arch
	var interval, nextn int
	get("ssm.conv_kernel", &m.SSMConvKernel, 0, true)
	get("ssm.state_size", &m.SSMState, 0, true)
	get("ssm.group_count", &m.SSMGroups, 0, true)
	get("ssm.time_step_rank", &m.SSMHeadsV, 0, true)
	get("full_attention_interval", &interval, 4, false)
	get("nextn_predict_layers", &nextn, 0, false)
	m.AttnGate = true
	main := m.Layers - nextn
	if main < 0 {
		return fmt.Errorf("model %s: %s.nextn_predict_layers = %d is more than the %d layers", f.Path, arch, nextn, m.Layers)
	}
	m.RecurrentLayers = 0
	if flags, ok := f.Bools(arch + ".attention.recurrent_layers"); ok {
		for i, r := range flags {
			if r && i < main {
				m.RecurrentLayers++
			}
		}
		return nil
	}
	if interval <= 0 {
		return fmt.Errorf("model %s: %s.full_attention_interval = %d, want at least 1", f.Path, arch, interval)
	}
	for i := 0; i < main; i++ {
		if (i+1)%interval != 0 {
			m.RecurrentLayers++
		}
	}
	return nil
}

// DeviceOf turns a Vulkan device into the plan's device facts: the largest device-local heap,
// its budget and usage when the driver reports them, whether this platform is WDDM, and
// whether its prefill stages weights as fp16 (vulkan.StagesPrefillWeights).
func DeviceOf(d vulkan.DeviceInfo) plan.Device {
	out := plan.Device{Index: d.Index, Name: d.Name, Key: d.Key(), MaxStorageBufferRange: int64(min(d.MaxStorageBufferRange, 1<<62)), WDDM: PlatformWDDM,
		StagesWeights: vulkan.StagesPrefillWeights(d)}
	var best *vulkan.Heap
	for i := range d.Heaps {
		h := &d.Heaps[i]
		if h.DeviceLocal && (best == nil || h.Size > best.Size) {
			best = h
		}
	}
	if best != nil {
		out.HeapBytes = int64(best.Size)
		if d.BudgetReported && best.Budget > 0 {
			out.BudgetReported, out.BudgetBytes, out.UsageBytes = true, int64(best.Budget), int64(best.Usage)
		}
	}
	return out
}

// Ctx reads VKLLM_GPU_CTX_MAX and VKLLM_GPU_MIN_CTX around the requested context.
func Ctx(requested int, strict bool) plan.CtxRequest {
	return plan.CtxRequest{Requested: requested, Max: max(config.GPUCtxMax.Int(), 0), MinCtx: config.GPUMinCtx.Int(), Strict: strict}
}

// ForceSplit reports VKLLM_GPU_RESIDENT=0.
func ForceSplit() bool { return config.GPUResident.Set() && !config.GPUResident.Bool() }

// PinOf settles the pin: flagMB (--vram-mb) first, then VKLLM_GPU_VRAM_MB, then the stored pin
// for this GPU (storedMB, 0 when none). A flag or the env var over a stored pin records the pin
// it overrides so the plan can say so.
func PinOf(flagMB, storedMB int) plan.Pin {
	switch {
	case flagMB > 0:
		return plan.Pin{MB: flagMB, Source: plan.PinFlag, StoredMB: storedMB}
	case config.GPUVRAMMB.Set() && config.GPUVRAMMB.Int() > 0:
		return plan.Pin{MB: config.GPUVRAMMB.Int(), Source: plan.PinEnv, StoredMB: storedMB}
	case storedMB > 0:
		return plan.Pin{MB: storedMB, Source: plan.PinStore}
	}
	return plan.Pin{}
}

// Input assembles the plan's input for a model on a device.
func Input(f *gguf.File, dev plan.Device, pin plan.Pin, ctx plan.CtxRequest) (plan.Input, error) {
	// What loading refuses, planning refuses too, with the same words: model.Load checks the
	// architecture, every hyperparameter and every tensor's shape (it reads no weights).
	if _, err := model.Load(f); err != nil {
		return plan.Input{}, err
	}
	m, err := ModelOf(f)
	if err != nil {
		return plan.Input{}, err
	}
	ups, err := Uploads(f)
	if err != nil {
		return plan.Input{}, err
	}
	return plan.Input{
		Model: m, Uploads: ups, KV: plan.KVFor(m), Scratch: plan.ScratchFor(m).WithWeightStaging(dev.StagesWeights),
		Device: dev, Pin: pin, Ctx: ctx, ForceSplit: ForceSplit(),
	}, nil
}

// ForDevice plans f on a Vulkan device with the environment's settings (VKLLM_GPU_VRAM_MB,
// VKLLM_GPU_CTX_MAX, VKLLM_GPU_MIN_CTX, VKLLM_GPU_RESIDENT): the one call the engine makes before
// it chooses the resident driver or the split, and logs with plan.Plan.Log. storedPinMB is the
// store's pin for d.Key() (0: none).
func ForDevice(f *gguf.File, d vulkan.DeviceInfo, storedPinMB, requestedCtx int, strict bool) (plan.Plan, error) {
	in, err := Input(f, DeviceOf(d), PinOf(0, storedPinMB), Ctx(requestedCtx, strict))
	if err != nil {
		return plan.Plan{}, err
	}
	return plan.Compute(in), nil
}
