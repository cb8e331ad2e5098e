package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/plan"
)

// The engine says why a model runs on the CPU in the CLI's words (ModelInfo.CPUReason: "forced by
// --cpu", the plan's line with VKLLM_GPU_VRAM_MB as the remedy). The app's header says it in the
// app's words instead: what happened, the plan's numbers as a sentence, and the remedy as the
// app offers it (Load options, the Pins tab). The phrases below are the openings of the engine's
// sentences (engine/cpureason.go) that the app translates.
const (
	engineForcedCPU    = "On the CPU: forced by --cpu"
	engineNoBackend    = "this build has no GPU backend"
	enginePlanDeclined = "On the CPU: declined by the plan"
	engineForcedSplit  = "forced by VKLLM_GPU_RESIDENT=0"
	engineNoSuchDevice = "which names no Vulkan device"
	engineOutOfMemory  = "ran out of memory uploading the model"
)

// CPUChosenReason is the header's sentence for a model the load options put on the CPU.
const CPUChosenReason = "On the CPU: chosen in the load options (Device: CPU)."

// ExplainPlacement keeps the header's "why on the CPU" true under the load options and in the
// app's words, without asking the plan: a plan's decline is said without its numbers. The
// services use PlacementExplainer, which asks.
func ExplainPlacement(info engine.ModelInfo, o LoadOptions) engine.ModelInfo {
	info.CPUReason = cpuReasonWords(info, o, nil)
	return info
}

// PlanFunc asks the engine for the resident plan of a model (Engine.Plan).
type PlanFunc func(ctx context.Context, req PlanRequest) (json.RawMessage, error)

// PlacementExplainer says in the app's words why the loaded model runs on the CPU. For a plan's
// decline it asks the plan of the same load (model, context, device) for the numbers, once per
// load: the last answer is kept until the engine's reason or the options change.
type PlacementExplainer struct {
	plan PlanFunc

	mu       sync.Mutex
	lastKey  string
	lastText string
}

// NewPlacementExplainer returns an explainer asking plan for the numbers (nil: it never asks).
func NewPlacementExplainer(plan PlanFunc) *PlacementExplainer {
	return &PlacementExplainer{plan: plan}
}

// Explain returns info with CPUReason in the app's words ("" on a GPU).
func (x *PlacementExplainer) Explain(ctx context.Context, info engine.ModelInfo, o LoadOptions) engine.ModelInfo {
	o = o.normalized()
	asks := info.Backend == "cpu" && o.Device != DeviceCPU && strings.HasPrefix(info.CPUReason, enginePlanDeclined)
	if !asks || x == nil || x.plan == nil {
		return ExplainPlacement(info, o)
	}
	key := fmt.Sprintf("%s\x00%s\x00%+v", info.Path, info.CPUReason, o)
	x.mu.Lock()
	if key == x.lastKey {
		info.CPUReason = x.lastText
		x.mu.Unlock()
		return info
	}
	x.mu.Unlock()
	req := PlanRequest{Model: info.Path, Ctx: o.Context}
	if o.Device != DeviceAuto {
		if i, err := gpuIndex(o.Device); err == nil {
			req.Device = &i
		}
	}
	var p *plan.Plan
	raw, err := x.plan(ctx, req)
	if err == nil {
		p = new(plan.Plan)
		err = json.Unmarshal(raw, p)
	}
	if err != nil {
		slog.Warn("ask the plan why the model runs on the CPU; the header says it without the numbers", "err", err)
		return ExplainPlacement(info, o)
	}
	info.CPUReason = cpuReasonWords(info, o, p)
	x.mu.Lock()
	x.lastKey, x.lastText = key, info.CPUReason
	x.mu.Unlock()
	return info
}

// outOfMemory reads the GPU and the planned megabytes from the engine's out-of-memory sentence.
var outOfMemory = regexp.MustCompile(`On the CPU: (.+) ran out of memory uploading the model \((\d+) MB planned`)

// cpuReasonWords is the header's sentence for info under the load options o; p is the plan of
// the load when one was asked (nil: the plan's decline is said without its numbers).
func cpuReasonWords(info engine.ModelInfo, o LoadOptions, p *plan.Plan) string {
	o = o.normalized()
	r := info.CPUReason
	switch {
	case info.Backend != "cpu":
		return ""
	case o.Device == DeviceCPU:
		return CPUChosenReason
	case strings.HasPrefix(r, engineForcedCPU):
		return "On the CPU: the engine was started on the CPU; choose a GPU or Automatic in Load options."
	case strings.Contains(r, engineNoBackend):
		return "On the CPU: this build of the app has no GPU support."
	case strings.Contains(r, engineForcedSplit):
		return "On the CPU: the app was started with whole-model GPU loading turned off, and split between the CPU and the GPU no layer of the model fits on the GPU; start the app without that setting."
	case strings.HasPrefix(r, enginePlanDeclined):
		if p == nil {
			return "On the CPU: the model does not fit in the GPU memory the plan may use; the Model tab's plan gives the numbers."
		}
		return planDeclinedWords(p)
	case strings.Contains(r, engineNoSuchDevice):
		return "On the CPU: the GPU the app was started with is not on this machine; pick a device in Load options."
	case strings.Contains(r, engineOutOfMemory):
		if m := outOfMemory.FindStringSubmatch(r); m != nil {
			return fmt.Sprintf("On the CPU: %s ran out of memory loading the model (%s MB planned); lower this GPU's VRAM pin in the Pins tab, or close other programs using the GPU.", m[1], m[2])
		}
		return "On the CPU: the GPU ran out of memory loading the model; lower this GPU's VRAM pin in the Pins tab, or close other programs using the GPU."
	case strings.Contains(r, "VKLLM_") || strings.Contains(r, " --"):
		// An engine sentence the app has no words for: it names the CLI's settings, not the app's.
		return "On the CPU: the GPU did not take the model; the app's log says why."
	}
	return r // already in the app's words (the engine's no-device sentences, or translated)
}

// planDeclinedWords says a declined plan's numbers as a sentence and the remedy as the app offers
// it: lower the context where it would fit at a smaller one, else let the plan use more of the GPU.
func planDeclinedWords(p *plan.Plan) string {
	dev := p.Device.Name
	if dev == "" {
		dev = "the GPU"
	}
	if p.Ctx.Start < plan.LeastCtx && p.Ctx.BoundBy == "binding cap" {
		return fmt.Sprintf("On the CPU: the largest buffer %s can bind holds the KV cache of %d positions, fewer than the %d the engine needs.", dev, p.Ctx.BindingCap, plan.LeastCtx)
	}
	need := p.Weights.Bytes + int64(p.Ctx.Start)*p.KV.PerPos + p.Scratch.Total
	kv := need - p.Weights.Bytes - p.Scratch.Total
	numbers := fmt.Sprintf("the model needs %d MB of GPU memory at a context of %d tokens (weights %d MB, KV cache %d MB, scratch %d MB)",
		plan.MBUp(need), p.Ctx.Start, plan.MBUp(p.Weights.Bytes), plan.MBUp(kv), plan.MBUp(p.Scratch.Total))
	usable := plan.MBDown(p.UsableBytes)
	var room, remedy string
	switch {
	case p.Source == plan.SourcePin && p.Pin.Source == plan.PinStore:
		room = fmt.Sprintf("this GPU's VRAM pin allows %d MB", p.Pin.MB)
		remedy = "raise this GPU's VRAM pin in the Pins tab, or clear it"
	case p.Source == plan.SourcePin && p.Pin.Source == plan.PinEnv:
		room = fmt.Sprintf("the VRAM limit the app was started with allows %d MB", p.Pin.MB)
		remedy = "start the app without that limit or with a higher one (it outranks the Pins tab)"
	case p.Source == plan.SourcePin:
		room = fmt.Sprintf("a VRAM pin allows %d MB", p.Pin.MB)
		remedy = "raise the pin"
	case p.Source == plan.SourceBudget && plan.MBDown(p.Device.BudgetBytes-p.Device.UsageBytes-p.MarginBytes) == usable:
		room = fmt.Sprintf("the driver leaves %d MB free for it (%d MB budget, %d MB in use, %d MB kept spare)",
			usable, plan.MBDown(p.Device.BudgetBytes), plan.MBUp(p.Device.UsageBytes), plan.MBUp(p.MarginBytes))
		remedy = "close other programs using the GPU, or pin more of its memory in the Pins tab"
	default: // the heap less what the plan keeps free (under a budget with more room than that too)
		room = fmt.Sprintf("the plan may use %d MB of %s's %d MB (it keeps the rest free for the desktop and other programs)", usable, dev, plan.MBDown(p.Device.HeapBytes))
		remedy = "pin more of its memory in the Pins tab"
	}
	if p.Ctx.FitCtx >= plan.LeastCtx {
		remedy = fmt.Sprintf("lower the context to %d in Load options, or %s", p.Ctx.FitCtx, remedy)
	}
	return fmt.Sprintf("On the CPU: %s, but %s. %s.", numbers, room, upperFirst(remedy))
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// NoModelLoaded is the header's sentence when the engine holds no model (after Unload).
const NoModelLoaded = "No model loaded — open one in the Model tab."

// noModelError says in one sentence why the engine has no model to describe: none is loaded
// (Unload), the last load failed, or the engine is starting. It wraps err for the logs.
func noModelError(err error) error {
	msg := err.Error()
	switch {
	case isConnectionRefused(err):
		return &replyError{"The engine is starting; the model shows here once it is loaded.", err}
	case strings.Contains(msg, "no model loaded: the last load failed"):
		return &replyError{"No model loaded: the last one did not load — open one in the Model tab.", err}
	case strings.Contains(msg, "no model loaded"):
		return &replyError{NoModelLoaded, err}
	}
	return fmt.Errorf("ask the engine for its model: %w", err)
}
