package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/vkllm/vkllm/engine"
)

// ModelService tells which model the engine has loaded, opens another GGUF file (by a path, the
// native file dialog, a file dropped on the window or the recent list), goes back to the embedded
// model and unloads (models_open.go).
type ModelService struct {
	ctx    context.Context
	engine Engine
	emit   Emitter

	mu      sync.Mutex
	recents RecentStore // nil: no recent list
	dialog  FileDialog  // nil: no native dialog (browser mode, or before the window starts)
}

// NewModelService returns the model service.
func NewModelService(ctx context.Context, eng Engine, em Emitter) *ModelService {
	return &ModelService{ctx: ctx, engine: eng, emit: em}
}

// Current returns the loaded model: name, architecture, size, context and placement.
func (s *ModelService) Current() (engine.ModelInfo, error) {
	info, err := s.engine.Model(s.ctx)
	if err != nil {
		return engine.ModelInfo{}, noModelError(err)
	}
	return info, nil
}

// Open loads the GGUF file at path in place of the current model and announces it as an
// engine:event of kind "model". When the load fails the engine keeps the model it had, and that
// one is announced instead, so the UI shows which model is serving.
// A leading ~ in path is the home folder; a model that loads goes to the top of the recent list.
func (s *ModelService) Open(path string) (engine.ModelInfo, error) {
	path, err := ExpandHome(path)
	if err != nil {
		return engine.ModelInfo{}, err
	}
	if path == "" {
		return engine.ModelInfo{}, errors.New("open model: no path given; enter the path of a .gguf file")
	}
	info, err := s.engine.LoadModel(s.ctx, path)
	if err != nil {
		if serving, merr := s.engine.Model(s.ctx); merr == nil {
			s.emit.Emit(EventEngine, EngineEvent{Kind: "model", Model: &serving, AtMs: nowMs()})
		}
		return engine.ModelInfo{}, fmt.Errorf("open model %q: %w", path, err)
	}
	s.emit.Emit(EventEngine, EngineEvent{Kind: "model", Model: &info, AtMs: nowMs()})
	s.remember(path)
	return info, nil
}

// DevicesService lists the Vulkan devices and the CPU the engine can run on.
type DevicesService struct {
	ctx    context.Context
	engine Engine
}

// NewDevicesService returns the devices service.
func NewDevicesService(ctx context.Context, eng Engine) *DevicesService {
	return &DevicesService{ctx: ctx, engine: eng}
}

// List returns the engine's device report as JSON (the same document as `vkllm devices --json`).
func (s *DevicesService) List() (json.RawMessage, error) {
	raw, err := s.engine.Devices(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	return raw, nil
}

// PlanService asks the engine where a model would be placed and why.
type PlanService struct {
	ctx    context.Context
	engine Engine
}

// NewPlanService returns the plan service.
func NewPlanService(ctx context.Context, eng Engine) *PlanService {
	return &PlanService{ctx: ctx, engine: eng}
}

// Plan returns the resident plan for a model as JSON (the same document as `vkllm plan --json`).
// A leading ~ in the model's path is the home folder.
func (s *PlanService) Plan(req PlanRequest) (json.RawMessage, error) {
	var err error
	if req.Model, err = ExpandHome(req.Model); err != nil {
		return nil, err
	}
	raw, err := s.engine.Plan(s.ctx, req)
	if err != nil {
		return nil, fmt.Errorf("plan model %q: %w", req.Model, err)
	}
	return raw, nil
}

// PinService lists, sets and clears the per-GPU VRAM pins the plan honours.
type PinService struct {
	ctx     context.Context
	store   PinStore
	devices DeviceLister // nil: pins are not checked against this machine's GPUs
}

// DeviceLister is the engine's device list (the sidecar's /vkllm/devices JSON).
type DeviceLister interface {
	Devices(ctx context.Context) (json.RawMessage, error)
}

// NewPinService returns the pin service; a pin may name only a GPU devices lists (nil: any key).
func NewPinService(ctx context.Context, st PinStore, devices DeviceLister) *PinService {
	return &PinService{ctx: ctx, store: st, devices: devices}
}

// checkDevice says, when the key names no GPU of this machine, which ones there are.
func (s *PinService) checkDevice(deviceKey string) error {
	if s.devices == nil {
		return nil
	}
	raw, err := s.devices.Devices(s.ctx)
	if err != nil {
		return fmt.Errorf("set pin for %s: the GPUs of this machine could not be listed (%w); try again once the engine runs", deviceKey, err)
	}
	var rep struct {
		Vulkan []struct {
			Index    int    `json:"index"`
			Name     string `json:"name"`
			VendorID uint32 `json:"vendor_id"`
			DeviceID uint32 `json:"device_id"`
			UUID     string `json:"uuid"`
		} `json:"vulkan"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("set pin for %s: the engine's device list did not parse (%w)", deviceKey, err)
	}
	var have []string
	for _, d := range rep.Vulkan {
		key := fmt.Sprintf("%04x:%04x:%s", d.VendorID, d.DeviceID, d.UUID) // vulkan.DeviceInfo.Key
		if key == deviceKey {
			return nil
		}
		have = append(have, fmt.Sprintf("GPU %d %s (%s)", d.Index, d.Name, key))
	}
	if len(have) == 0 {
		return fmt.Errorf("set pin for %s: this machine has no Vulkan GPU to pin", deviceKey)
	}
	return fmt.Errorf("set pin for %s: no GPU of this machine has that key; pick one of: %s", deviceKey, strings.Join(have, ", "))
}

// List returns every pin.
func (s *PinService) List() ([]Pin, error) {
	pins, err := s.store.ListPins(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("list pins: %w", err)
	}
	if pins == nil {
		pins = []Pin{}
	}
	return pins, nil
}

// Set pins the usable VRAM of one GPU (its key as `vkllm devices` shows it) to mb MiB.
func (s *PinService) Set(deviceKey string, mb int) error {
	deviceKey = strings.TrimSpace(deviceKey)
	if deviceKey == "" {
		return errors.New("set pin: no device key; pick a GPU from the device list")
	}
	if mb <= 0 {
		return fmt.Errorf("set pin for %s: %d MiB is not a size; give a positive number of MiB", deviceKey, mb)
	}
	if err := s.checkDevice(deviceKey); err != nil {
		return err
	}
	if err := s.store.SetPin(s.ctx, deviceKey, mb); err != nil {
		return fmt.Errorf("set pin for %s: %w", deviceKey, err)
	}
	return nil
}

// Clear removes the pin of one GPU.
func (s *PinService) Clear(deviceKey string) error {
	if err := s.store.ClearPin(s.ctx, deviceKey); err != nil {
		return fmt.Errorf("clear pin for %s: %w", deviceKey, err)
	}
	return nil
}
