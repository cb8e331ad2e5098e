package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/plan"
)

// LoadOptions are how a model is loaded, kept per model (by its path) and applied by reloading
// it in the engine.
type LoadOptions struct {
	// Context is the context length asked for; 0 = the model's own, capped by the plan.
	Context int `json:"context"`
	// Device is where the model runs: "auto" (the resident plan decides: the best GPU, a split,
	// or the CPU), "gpu:N" (Vulkan device N, the CPU when the plan declines it) or "cpu".
	// "" reads as "auto".
	Device string `json:"device"`
	// KV is the KV cache type: "f16" (every backend; the default) or "f32" (the CPU only).
	// "" reads as "f16".
	KV string `json:"kv"`
}

// Device choices of LoadOptions.Device.
const (
	DeviceAuto = "auto"
	DeviceCPU  = "cpu"
)

// normalized spells the defaults out, so equal choices compare and save equal.
func (o LoadOptions) normalized() LoadOptions {
	if o.Device == "" {
		o.Device = DeviceAuto
	}
	if o.KV == "" {
		o.KV = "f16"
	}
	return o
}

// EngineLoad is a load as the engine takes it (the sidecar's POST /vkllm/load body).
type EngineLoad struct {
	Path    string
	Ctx     int    // 0 = the model's own, capped by the plan
	Backend string // "auto", "gpu" or "cpu"
	Device  *int   // nil = the engine's choice
	KV      string // "" = f16
}

// engineLoad turns the options of the model at path into the engine's load. The options are
// assumed checked (gpuIndex refuses a malformed device).
func (o LoadOptions) engineLoad(path string) (EngineLoad, error) {
	o = o.normalized()
	l := EngineLoad{Path: path, Ctx: o.Context, Backend: string(engine.BackendAuto), KV: o.KV}
	switch {
	case o.Device == DeviceAuto:
	case o.Device == DeviceCPU:
		l.Backend = string(engine.BackendCPU)
	default:
		i, err := gpuIndex(o.Device)
		if err != nil {
			return EngineLoad{}, err
		}
		l.Device = &i
	}
	return l, nil
}

// gpuIndex reads "gpu:N".
func gpuIndex(device string) (int, error) {
	n, ok := strings.CutPrefix(device, "gpu:")
	i, err := strconv.Atoi(n)
	if !ok || err != nil || i < 0 {
		return 0, fmt.Errorf("device %q is not one of auto, cpu or gpu:N; pick one from the list", device)
	}
	return i, nil
}

// OptionsLoader loads a model with load options (the sidecar through main.go's adapter): a load
// that fails leaves the engine serving the model it had.
type OptionsLoader interface {
	LoadModelWith(ctx context.Context, load EngineLoad) (engine.ModelInfo, error)
}

// LoadOptionsStore keeps each model's load options as JSON, by the model's path ("" = the
// embedded model); *store.Store satisfies it.
type LoadOptionsStore interface {
	LoadOptions(ctx context.Context, path string) (options string, ok bool, err error)
	SetLoadOptions(ctx context.Context, path, options string) error
}

// StoredLoadOptions returns the options saved for the model at path, or the defaults when none
// are saved or they cannot be read (which is logged: a model still loads).
func StoredLoadOptions(ctx context.Context, st LoadOptionsStore, path string) (LoadOptions, bool) {
	raw, ok, err := st.LoadOptions(ctx, path)
	if err != nil {
		slog.Warn("read the model's load options; loading with the defaults", "path", path, "err", err)
		return LoadOptions{}.normalized(), false
	}
	if !ok {
		return LoadOptions{}.normalized(), false
	}
	var o LoadOptions
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		slog.Warn("the model's saved load options are not JSON; loading with the defaults", "path", path, "err", err)
		return LoadOptions{}.normalized(), false
	}
	return o.normalized(), true
}

// StoredEngineLoad is the engine's load of the model at path with its saved options (the
// defaults when none are saved or they no longer parse).
func StoredEngineLoad(ctx context.Context, st LoadOptionsStore, path string) EngineLoad {
	o, _ := StoredLoadOptions(ctx, st, path)
	l, err := o.engineLoad(path)
	if err != nil {
		slog.Warn("the model's saved device is malformed; loading with the defaults", "path", path, "err", err)
		l, _ = LoadOptions{}.engineLoad(path)
	}
	return l
}

// DeviceChoice is one entry of the load options' device list.
type DeviceChoice struct {
	Value string `json:"value"` // a LoadOptions.Device
	Label string `json:"label"`
}

// LoadState is what the load options panel shows: the model and where it runs now, its saved
// options, the context's two bounds, and the choices.
type LoadState struct {
	Model   engine.ModelInfo `json:"model"`
	Options LoadOptions      `json:"options"`
	Saved   bool             `json:"saved"` // the options were saved for this model (else the defaults)
	// TrainedContext is the context the model was trained for: no load asks for more.
	TrainedContext int `json:"trainedContext"`
	// PlanContext is the most context the resident plan fits on the chosen GPU (the default one
	// for "auto"); 0 when it does not fit there at all, or the choice is the CPU.
	PlanContext int `json:"planContext"`
	// PlanDevice names the GPU PlanContext is for; PlanVerdict is the plan's one line.
	PlanDevice  string          `json:"planDevice"`
	PlanVerdict string          `json:"planVerdict"`
	Devices     []DeviceChoice  `json:"devices"`
	KVTypes     []engine.KVType `json:"kvTypes"`
}

// LoadOptionsService shows and applies the loaded model's load options: context length, device
// or CPU, KV cache type. Applying one reloads the model in the engine and saves the options for
// that model, so the next load of it (an app restart, reopening it) uses them again.
type LoadOptionsService struct {
	ctx    context.Context
	engine Engine
	loader OptionsLoader
	store  LoadOptionsStore
	emit   Emitter
	place  *PlacementExplainer
}

// NewLoadOptionsService returns the load options service.
func NewLoadOptionsService(ctx context.Context, eng Engine, loader OptionsLoader, st LoadOptionsStore, em Emitter) *LoadOptionsService {
	return &LoadOptionsService{ctx: ctx, engine: eng, loader: loader, store: st, emit: em, place: NewPlacementExplainer(eng.Plan)}
}

// Current returns the loaded model's load options, their bounds for opts' device (nil = the
// saved device) and the choices.
func (s *LoadOptionsService) Current() (LoadState, error) {
	return s.state(nil)
}

// Preview is Current with the bounds computed for another device choice (the panel asks as the
// user picks one, before applying).
func (s *LoadOptionsService) Preview(device string) (LoadState, error) {
	return s.state(&device)
}

func (s *LoadOptionsService) state(device *string) (LoadState, error) {
	info, err := s.engine.Model(s.ctx)
	if err != nil {
		return LoadState{}, fmt.Errorf("ask the engine for its model: %w", err)
	}
	o, saved := StoredLoadOptions(s.ctx, s.store, info.Path)
	st := LoadState{Model: s.place.Explain(s.ctx, info, o), Options: o, Saved: saved, TrainedContext: info.ContextLength, KVTypes: engine.KVTypes()}
	st.Devices, st.PlanDevice = s.devices()
	dev := o.Device
	if device != nil {
		dev = LoadOptions{Device: *device}.normalized().Device
	}
	if dev != DeviceCPU {
		s.planBound(&st, info, dev)
	}
	return st, nil
}

// devices lists auto, each Vulkan device and the CPU, and names the GPU "auto" would plan for.
func (s *LoadOptionsService) devices() ([]DeviceChoice, string) {
	out := []DeviceChoice{{Value: DeviceAuto, Label: "Automatic (the plan picks the GPU, a split or the CPU)"}}
	raw, err := s.engine.Devices(s.ctx)
	var rep struct {
		Vulkan []struct {
			Index int    `json:"index"`
			Name  string `json:"name"`
		} `json:"vulkan"`
		Default *int `json:"default"`
		CPU     struct {
			Model string `json:"model"`
			Cores int    `json:"cores"`
		} `json:"cpu"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &rep)
	}
	if err != nil {
		slog.Warn("list devices for the load options", "err", err)
	}
	var def string
	for _, d := range rep.Vulkan {
		out = append(out, DeviceChoice{Value: fmt.Sprintf("gpu:%d", d.Index), Label: fmt.Sprintf("GPU %d: %s", d.Index, d.Name)})
		if rep.Default != nil && *rep.Default == d.Index {
			def = fmt.Sprintf("GPU %d: %s", d.Index, d.Name)
		}
	}
	cpu := "CPU"
	if rep.CPU.Model != "" {
		cpu = fmt.Sprintf("CPU: %s, %d cores", rep.CPU.Model, rep.CPU.Cores)
	}
	return append(out, DeviceChoice{Value: DeviceCPU, Label: cpu}), def
}

// planBound asks the resident plan how much context fits on the device (at most the trained
// context) and says so in st.
func (s *LoadOptionsService) planBound(st *LoadState, info engine.ModelInfo, device string) {
	req := PlanRequest{Model: info.Path, Ctx: info.ContextLength}
	if device != DeviceAuto {
		i, err := gpuIndex(device)
		if err != nil {
			return
		}
		req.Device = &i
		st.PlanDevice = ""
		for _, d := range st.Devices {
			if d.Value == device {
				st.PlanDevice = d.Label
			}
		}
	}
	raw, err := s.engine.Plan(s.ctx, req)
	if err != nil {
		st.PlanVerdict = "No plan for this device: " + err.Error()
		return
	}
	var p plan.Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		st.PlanVerdict = "The plan's answer did not parse: " + err.Error()
		return
	}
	// In the app's words, not the plan's line (which names the CLI's settings).
	if p.Verdict.Armed {
		st.PlanContext = p.Ctx.Chosen
		st.PlanVerdict = fmt.Sprintf("it fits whole on the GPU at a context of %d tokens.", p.Ctx.Chosen)
		return
	}
	st.PlanVerdict = strings.TrimPrefix(planDeclinedWords(&p), "On the CPU: ")
}

// Apply reloads the loaded model with opts and saves them for it. The options are checked
// first: the context within the trained context and, on a GPU the plan fits, within the plan's;
// the device one of the list; an f32 cache on the CPU only. A reload that fails leaves the model
// running as it was, and says why.
func (s *LoadOptionsService) Apply(opts LoadOptions) (LoadState, error) {
	opts = opts.normalized()
	st, err := s.state(&opts.Device)
	if err != nil {
		return LoadState{}, err
	}
	if err := checkLoadOptions(opts, st); err != nil {
		return st, err
	}
	path := st.Model.Path
	load, err := opts.engineLoad(path)
	if err != nil {
		return st, err
	}
	info, err := s.loader.LoadModelWith(s.ctx, load)
	if err != nil {
		serving, merr := s.engine.Model(s.ctx)
		if merr != nil {
			// The sidecar's error says that nothing is loaded now, and what to do.
			return st, fmt.Errorf("reload %s with these options: %w", st.Model.Name, err)
		}
		serving = s.place.Explain(s.ctx, serving, st.Options)
		s.emit.Emit(EventEngine, EngineEvent{Kind: "model", Model: &serving, AtMs: nowMs()})
		if strings.Contains(err.Error(), "keeps serving") {
			return st, fmt.Errorf("reload %s with these options: %w", st.Model.Name, err)
		}
		return st, fmt.Errorf("reload %s with these options: %w; it keeps running as before", st.Model.Name, err)
	}
	raw, _ := json.Marshal(opts)
	if err := s.store.SetLoadOptions(s.ctx, path, string(raw)); err != nil {
		slog.Warn("save the model's load options", "path", path, "err", err)
	}
	info = s.place.Explain(s.ctx, info, opts)
	s.emit.Emit(EventEngine, EngineEvent{Kind: "model", Model: &info, AtMs: nowMs()})
	return s.state(nil)
}

// checkLoadOptions refuses options the model or the device cannot take, in one sentence each.
func checkLoadOptions(o LoadOptions, st LoadState) error {
	known := false
	for _, d := range st.Devices {
		known = known || d.Value == o.Device
	}
	if !known {
		return fmt.Errorf("device %q is not on this machine; pick one from the list", o.Device)
	}
	kv := false
	for _, t := range st.KVTypes {
		if t.Name != o.KV {
			continue
		}
		kv = true
		if t.CPUOnly && o.Device != DeviceCPU {
			return fmt.Errorf("a %s KV cache is kept by the CPU only; choose f16, or the CPU as the device", o.KV)
		}
	}
	if !kv {
		return fmt.Errorf("KV cache type %q is not one the engine keeps; choose f16, or f32 on the CPU", o.KV)
	}
	switch {
	case o.Context < 0:
		return fmt.Errorf("a context of %d tokens is negative; give 0 for the model's own, or a positive length", o.Context)
	case st.TrainedContext > 0 && o.Context > st.TrainedContext:
		return fmt.Errorf("a context of %d tokens is more than the %d %s was trained for; choose %d or less", o.Context, st.TrainedContext, st.Model.Name, st.TrainedContext)
	case o.Device != DeviceCPU && st.PlanContext > 0 && o.Context > st.PlanContext:
		return fmt.Errorf("a context of %d tokens does not fit %s, where the plan fits %d; choose %d or less, or the CPU", o.Context, st.PlanDevice, st.PlanContext, st.PlanContext)
	}
	return nil
}
