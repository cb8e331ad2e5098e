package main

import (
	"context"
	"encoding/json"

	"github.com/vkllm/vkllm/app"
)

// PlanInput makes sidecarEngine an app.PlanInputEngine (the what-if's input).
func (e sidecarEngine) PlanInput(ctx context.Context, req app.PlanRequest) (json.RawMessage, error) {
	return e.sup.PlanInput(ctx, req)
}

var _ app.PlanInputEngine = sidecarEngine{}
