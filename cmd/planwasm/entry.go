// Command planwasm is the resident plan (engine/plan) built for WebAssembly, so the UI's what-if
// redraws the verdict in the page as the user drags a slider: `GOOS=js GOARCH=wasm go build
// ./cmd/planwasm` (make frontend does it) gives a module that defines one JavaScript function,
//
//	vkllmPlan(inputJSON string) string
//
// taking a plan.Input as JSON (what the sidecar's POST /vkllm/plan/input answers, with the
// device, pin or context changed) and returning the plan's JSON, byte for byte what the sidecar's
// POST /vkllm/plan answers for the same input; a bad input returns {"error": "..."} instead.
// Built for any other platform it reads the input on stdin and writes the plan to stdout.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/vkllm/vkllm/engine/plan"
)

// Bounds on an input, so nonsense from the page is refused by name rather than overflowing.
const (
	maxLayers = 1 << 16
	maxCtx    = 1 << 30
	maxBytes  = 1 << 52 // 4 PiB: beyond any heap, and exact as a JavaScript number
)

// planJSON decodes a plan.Input, checks it and returns plan.Compute's JSON for it.
func planJSON(input []byte) (out []byte, err error) {
	defer func() { // the page keeps its module after a bad input: a panic becomes an error
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("plan input: the plan failed on it (%v); check its fields", r)
		}
	}()
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	var in plan.Input
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("decode plan input: %w (want the JSON of POST /vkllm/plan/input)", err)
	}
	if err := checkInput(in); err != nil {
		return nil, fmt.Errorf("plan input: %w", err)
	}
	p := plan.Compute(in)
	return p.JSON()
}

// checkInput refuses fields the plan cannot mean, naming the field and what it wants.
func checkInput(in plan.Input) error {
	var errs []error
	atLeast := func(name string, v, least, most int64) {
		if v < least || v > most {
			errs = append(errs, fmt.Errorf("%s is %d, want %d to %d", name, v, least, most))
		}
	}
	atLeast("model.layers", int64(in.Model.Layers), 1, maxLayers)
	atLeast("model.ctx_length", int64(in.Model.CtxLength), 0, maxCtx)
	atLeast("kv.per_pos_bytes", in.KV.PerPos, 0, maxBytes/maxCtx)
	atLeast("kv.layer_per_pos_bytes", in.KV.LayerPos, 0, maxBytes/maxCtx)
	atLeast("kv.side_per_pos_bytes", in.KV.SidePerPos, 0, maxBytes/maxCtx)
	atLeast("scratch.bytes", in.Scratch.Total, 0, maxBytes)
	atLeast("device.heap_bytes", in.Device.HeapBytes, 0, maxBytes)
	atLeast("device.budget_bytes", in.Device.BudgetBytes, 0, maxBytes)
	atLeast("device.usage_bytes", in.Device.UsageBytes, 0, maxBytes)
	atLeast("device.max_storage_buffer_range", in.Device.MaxStorageBufferRange, 0, 1<<62)
	atLeast("pin.mb", int64(in.Pin.MB), 0, maxBytes/plan.MiB)
	atLeast("ctx.requested", int64(in.Ctx.Requested), 0, maxCtx)
	atLeast("ctx.max", int64(in.Ctx.Max), 0, maxCtx)
	atLeast("ctx.min", int64(in.Ctx.MinCtx), 0, maxCtx)
	var total int64
	for i, u := range in.Uploads {
		if u.Bytes < 0 || u.Bytes > maxBytes {
			errs = append(errs, fmt.Errorf("uploads[%d] (%s) bytes is %d, want 0 to %d", i, u.Name, u.Bytes, int64(maxBytes)))
			continue
		}
		total += u.Bytes
	}
	if total > maxBytes {
		errs = append(errs, fmt.Errorf("uploads sum to %d bytes, want at most %d", total, int64(maxBytes)))
	}
	return errors.Join(errs...)
}

// errorJSON is the answer to a bad input: {"error": "..."}.
func errorJSON(err error) string {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{err.Error()})
	return string(b)
}
