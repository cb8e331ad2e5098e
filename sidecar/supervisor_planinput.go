package sidecar

import (
	"context"
	"encoding/json"
	"net/http"
)

// PlanInput posts req to /vkllm/plan/input and returns the plan.Input JSON the plan is computed
// from, for the UI's WebAssembly what-if.
func (s *Supervisor) PlanInput(ctx context.Context, req any) (json.RawMessage, error) {
	inst, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	err = s.call(ctx, inst, http.MethodPost, "/vkllm/plan/input", req, &out)
	return out, err
}
