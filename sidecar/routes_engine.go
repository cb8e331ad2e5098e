package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"runtime"

	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/store"
)

// extraRoutes adds the routes backed by the device, plan and bench packages, and the prompt
// counter the app's context policy uses.
func (s *server) extraRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /vkllm/devices", s.handleDevices)
	mux.HandleFunc("POST /vkllm/plan", s.handlePlan)
	mux.HandleFunc("POST /vkllm/plan/input", s.handlePlanInput)
	mux.HandleFunc("POST /vkllm/bench", s.handleBench)
	mux.HandleFunc("POST /vkllm/tokenize", s.handleTokenize)
}

// DevicesReport is the body of GET /vkllm/devices (the shape of `vkllm devices --json`).
type DevicesReport struct {
	Vulkan      []vulkan.DeviceInfo `json:"vulkan"`
	VulkanError string              `json:"vulkan_error,omitempty"`
	Default     *int                `json:"default,omitempty"`
	CPU         struct {
		Model string `json:"model"`
		Cores int    `json:"cores"`
	} `json:"cpu"`
}

// handleDevices lists Vulkan devices; no device (or no loader) is reported in vulkan_error, not
// as a failure, so the UI can still show the CPU.
func (s *server) handleDevices(w http.ResponseWriter, r *http.Request) {
	var rep DevicesReport
	rep.Vulkan = []vulkan.DeviceInfo{}
	rep.CPU.Model, rep.CPU.Cores = store.LocalMachine().CPU, runtime.NumCPU()
	devs, err := vulkan.Devices()
	if err == nil {
		rep.Vulkan = devs
		if d, err := vulkan.ChooseDevice(devs, -1); err == nil {
			rep.Default = &d.Index
		}
	} else {
		rep.VulkanError = err.Error()
	}
	writeJSON(w, http.StatusOK, rep)
}

// PlanRequest is the body of POST /vkllm/plan; it mirrors `vkllm plan`'s flags.
type PlanRequest struct {
	Model     string `json:"model"`      // GGUF path; "" = the loaded model (the embedded one when none is)
	Ctx       int    `json:"ctx"`        // requested context; 0 = the model's own
	CtxStrict bool   `json:"ctx_strict"` // decline instead of shrinking the context
	VRAMMB    int    `json:"vram_mb"`    // pin for this plan (over VKLLM_GPU_VRAM_MB and the stored pin)
	Device    *int   `json:"device"`     // Vulkan device index; absent = VKLLM_DEVICE, else the best
}

// check refuses fields out of range, naming the field.
func (req PlanRequest) check() error {
	switch {
	case req.Ctx < 0:
		return fmt.Errorf("ctx %d is negative: want 0 (the model's own) or more", req.Ctx)
	case req.VRAMMB < 0:
		return fmt.Errorf("vram_mb %d is negative: want 0 (no pin) or more", req.VRAMMB)
	case req.Device != nil && *req.Device < 0:
		return fmt.Errorf("device %d is negative: want a Vulkan device index from `vkllm devices`, or leave it out", *req.Device)
	}
	return nil
}

// handlePlan answers with the same JSON as `vkllm plan --json`.
func (s *server) handlePlan(w http.ResponseWriter, r *http.Request) {
	var req PlanRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if err := req.check(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	p, err := s.plan(r.Context(), req)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request_error", err.Error())
		return
	}
	b, err := p.JSON()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// plan is plan.Compute of the input POST /vkllm/plan/input answers for the same request.
func (s *server) plan(ctx context.Context, req PlanRequest) (plan.Plan, error) {
	if err := req.check(); err != nil {
		return plan.Plan{}, err
	}
	f, path, err := s.openPlanModel(req.Model)
	if err != nil {
		return plan.Plan{}, err
	}
	defer f.Close()
	dev, err := planDevice(req.Device)
	if err != nil {
		return plan.Plan{}, err
	}
	in, err := s.planInputFor(ctx, f, path, dev, req)
	if err != nil {
		return plan.Plan{}, err
	}
	return plan.Compute(in), nil
}
