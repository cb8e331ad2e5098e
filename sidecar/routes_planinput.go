package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/store"
)

// handlePlanInput answers POST /vkllm/plan/input (the body of POST /vkllm/plan) with the
// plan.Input JSON the plan route computes from: the UI's WebAssembly plan (cmd/planwasm) varies
// its device, pin and context in the page. plan.Compute of this input is the plan route's answer
// for the same request. With no Vulkan device on this machine (and none asked for) the device is
// left empty, so the page can still plan for a card described by hand.
func (s *server) handlePlanInput(w http.ResponseWriter, r *http.Request) {
	var req PlanRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if err := req.check(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	f, path, err := s.openPlanModel(req.Model)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request_error", err.Error())
		return
	}
	defer f.Close()
	dev, err := planDevice(req.Device)
	if err != nil && (req.Device != nil || !errors.Is(err, errNoPlanDevice)) {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request_error", err.Error())
		return
	}
	in, err := s.planInputFor(r.Context(), f, path, dev, req)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, in)
}

// errNoPlanDevice marks a plan asked for on a machine without a Vulkan device.
var errNoPlanDevice = errors.New("no Vulkan device to plan for")

// openPlanModel opens the GGUF a plan request names: its path, else the loaded model's, else the
// embedded model (path ""). The caller closes it.
func (s *server) openPlanModel(model string) (*gguf.File, string, error) {
	path := model
	if path == "" {
		if m, err := s.current(); err == nil {
			path = m.Info().Path
		}
	}
	var f *gguf.File
	var err error
	if path == "" {
		f, err = gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	} else {
		f, err = gguf.OpenHeader(path) // the plan needs the header only; the weights may be absent
	}
	if err != nil {
		return nil, path, fmt.Errorf("open model %q for the plan: %w", path, err)
	}
	f.ShapesOnly() // the plan reads shapes and sizes, never a weight
	return f, path, nil
}

// planDevice is the plan's facts of the Vulkan device a request names (nil: VKLLM_DEVICE, else
// the best).
func planDevice(index *int) (plan.Device, error) {
	devs, err := vulkan.Devices()
	if err == nil && len(devs) == 0 {
		err = vulkan.ErrNoDevice
	}
	if err != nil {
		return plan.Device{}, fmt.Errorf("%w: %w (`vkllm plan --assume-heap-mb N` plans for a described device)", errNoPlanDevice, err)
	}
	want := -1
	if index != nil {
		want = *index
	}
	vd, err := vulkan.ChooseDevice(devs, want)
	if err != nil {
		return plan.Device{}, err
	}
	return planinput.DeviceOf(vd), nil
}

// planInputFor assembles the plan's input for f on dev with the request's pin and context (over
// VKLLM_GPU_VRAM_MB and the stored pin for dev).
func (s *server) planInputFor(ctx context.Context, f *gguf.File, path string, dev plan.Device, req PlanRequest) (plan.Input, error) {
	in, err := planinput.Input(f, dev, planinput.PinOf(req.VRAMMB, store.StoredPinMB(ctx, dev.Key)), planinput.Ctx(req.Ctx, req.CtxStrict))
	if err != nil {
		return plan.Input{}, fmt.Errorf("plan input for %q: %w", path, err)
	}
	if path == "" {
		in.Model.Name = embedded.Name + " (embedded)"
	}
	return in, nil
}
