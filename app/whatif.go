package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// PlanInputEngine is an Engine that also answers the plan's input (the sidecar's
// POST /vkllm/plan/input): the plan.Input JSON the plan is computed from, which the UI's
// WebAssembly what-if plans from with its own device, pin and context.
type PlanInputEngine interface {
	PlanInput(ctx context.Context, req PlanRequest) (json.RawMessage, error)
}

// Input returns the plan.Input JSON for a model ("" = the loaded one) on a device, so the page
// can run the plan itself as the user drags (the same request as Plan).
func (s *PlanService) Input(req PlanRequest) (json.RawMessage, error) {
	src, ok := s.engine.(PlanInputEngine)
	if !ok {
		return nil, errors.New("plan input: this engine does not describe the plan's input, so the what-if cannot run; restart the app with its own engine")
	}
	raw, err := src.PlanInput(s.ctx, req)
	if err != nil {
		return nil, fmt.Errorf("plan input for model %q: %w", req.Model, err)
	}
	return raw, nil
}
