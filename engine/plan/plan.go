// Package plan decides, before anything is uploaded, whether the whole model fits resident on a
// GPU, at which context, and if not how many whole layers go to the GPU instead. It is a pure
// function of plain inputs — no device, no file, no environment — so it runs unchanged in tests,
// in `vkllm plan`'s what-if mode and in WebAssembly for the UI. It imports only the standard
// library (a test holds it to that and builds it for js/wasm).
//
// Every MB figure in its texts is a MiB integer. Figures the model needs or the plan reserves
// (weights, KV, scratch, totals, headroom, margin, usage) round up; figures that say what there
// is (heap, cap, budget, usable) round down. A printed need never looks smaller, and a printed
// room never larger, than the byte-level decision the plan actually made.
package plan

import "fmt"

const (
	MiB = 1 << 20
	GiB = 1 << 30

	// DesktopReserve is left to the desktop and other programs when nothing is pinned: the cap is
	// the largest device-local heap minus this.
	DesktopReserve = 2 * GiB
	// HeadroomFloor is the least headroom kept when no driver reports free memory.
	HeadroomFloor = 2 * GiB
	// WDDMHeadroomPercent of the cap is kept under Windows WDDM, where the OS pages video memory
	// behind the application's back and a full heap silently spills to system memory.
	WDDMHeadroomPercent = 27

	// DefaultCtx is the starting context when neither the request nor the model names one.
	DefaultCtx = 4096
	// DefaultMinCtx is the floor a re-plan may shrink the context to (VKLLM_GPU_MIN_CTX).
	DefaultMinCtx = 4096
	// LeastCtx is the smallest floor accepted; lower settings are raised to it.
	LeastCtx = 256
)

// Device is what the plan knows of the GPU: the largest device-local heap and what the driver
// says about it.
type Device struct {
	Index          int    `json:"index"`
	Name           string `json:"name"`
	Key            string `json:"key,omitempty"` // stable per-GPU key of the pin store
	HeapBytes      int64  `json:"heap_bytes"`    // largest device-local heap
	BudgetReported bool   `json:"budget_reported"`
	BudgetBytes    int64  `json:"budget_bytes"` // VK_EXT_memory_budget heap budget, when reported
	UsageBytes     int64  `json:"usage_bytes"`  // VK_EXT_memory_budget heap usage, when reported
	// MaxStorageBufferRange bounds one binding; 0 means unknown and puts no bound on the context.
	MaxStorageBufferRange int64 `json:"max_storage_buffer_range"`
	WDDM                  bool  `json:"wddm"` // Windows display driver model
	// StagesWeights: prefill products stage weight rows as fp16 (NV cooperative matrix 2), so
	// the scratch holds Scratch.WeightStaging too.
	StagesWeights bool `json:"stages_weights,omitempty"`
	Assumed       bool `json:"assumed"` // facts from what-if flags, not a device
}

// Pin sources, highest precedence first.
const (
	PinFlag  = "flag"  // --vram-mb on the command line
	PinEnv   = "env"   // VKLLM_GPU_VRAM_MB
	PinStore = "store" // the per-machine, per-GPU pin in SQLite (vkllm pin set)
)

// Pin fixes the usable memory by hand. MB 0 means unpinned.
type Pin struct {
	MB     int    `json:"mb"`
	Source string `json:"source,omitempty"`
	// StoredMB is the stored pin for this GPU that a flag or VKLLM_GPU_VRAM_MB overrides (0: none).
	StoredMB int `json:"stored_mb,omitempty"`
}

// CtxRequest is what the user and the environment ask of the context.
type CtxRequest struct {
	Requested int  `json:"requested"` // --ctx; 0 = the model's context length
	Max       int  `json:"max"`       // VKLLM_GPU_CTX_MAX; 0 = no bound
	MinCtx    int  `json:"min"`       // VKLLM_GPU_MIN_CTX; 0 = DefaultMinCtx; raised to LeastCtx
	Strict    bool `json:"strict"`    // --ctx-strict: decline instead of shrinking
}

// Input is everything the plan decides from.
// Its JSON is what the sidecar's POST /vkllm/plan/input answers and the UI's WebAssembly plan
// (cmd/planwasm) reads.
type Input struct {
	Model      Model      `json:"model"`
	Uploads    []Upload   `json:"uploads"` // UploadList of the model's tensors
	KV         KV         `json:"kv"`      // KVFor(Model)
	Scratch    Scratch    `json:"scratch"` // ScratchFor(Model)
	Device     Device     `json:"device"`
	Pin        Pin        `json:"pin"`
	Ctx        CtxRequest `json:"ctx"`
	ForceSplit bool       `json:"force_split"` // VKLLM_GPU_RESIDENT=0
}

// PlanHeadroom is the memory kept free of a cap when no driver reports free memory: under WDDM
// the larger of 2 GiB and 27% of the cap, elsewhere the 2 GiB floor. (Pinned plans and plans with
// a reported budget keep none; Compute applies that.)
func PlanHeadroom(capBytes int64, wddm bool) int64 {
	if !wddm {
		return HeadroomFloor
	}
	share := capBytes * WDDMHeadroomPercent / 100
	if share > HeadroomFloor {
		return share
	}
	return HeadroomFloor
}

// BudgetMargin is kept below a reported budget − usage: the budget is a snapshot other programs
// move, and the driver makes allocations for us (descriptor pools, pipelines, command buffers)
// that no plan counts. It is 1/16 of the budget, at least 512 MiB and at most the 2 GiB floor a
// plan without a report keeps, so a report never leaves less room than no report would. On a
// 16 GiB budget that is 1 GiB.
func BudgetMargin(budgetBytes int64) int64 {
	m := budgetBytes / 16
	if m < 512*MiB {
		m = 512 * MiB
	}
	if m > HeadroomFloor {
		m = HeadroomFloor
	}
	return m
}

// Usable sources: where the usable figure came from.
const (
	SourceHeap   = "heap"   // largest heap − desktop reserve − headroom
	SourceBudget = "budget" // VK_EXT_memory_budget: budget − usage − margin
	SourcePin    = "pin"    // a pin (see Pin.Source)
)

// Headroom rules, as the JSON and the breakdown name them.
const (
	RuleFloor     = "2 GiB floor"
	RuleWDDMShare = "27% of the cap under WDDM"
	RuleWDDMFloor = "2 GiB floor under WDDM"
	RulePinned    = "none: pinned"
	RuleBudget    = "none: the driver reports a budget"
)

// Compute makes the plan.
func Compute(in Input) Plan {
	p := Plan{
		Model:   in.Model,
		KV:      in.KV,
		Scratch: in.Scratch,
		Device:  in.Device,
		Pin:     in.Pin,
	}
	p.Weights = weighUploads(in.Uploads)
	p.room(in)
	p.chooseCtx(in)
	p.decide(in)
	return p
}

// room sets cap, headroom, usable and their source.
func (p *Plan) room(in Input) {
	d := in.Device
	switch {
	case in.Pin.MB > 0:
		p.Source = SourcePin
		p.CapBytes = int64(in.Pin.MB) * MiB
		p.Headroom = Headroom{Rule: RulePinned}
		p.UsableBytes = p.CapBytes
	case d.BudgetReported:
		p.Source = SourceBudget
		p.CapBytes = max(d.HeapBytes-DesktopReserve, 0)
		p.Headroom = Headroom{Rule: RuleBudget}
		p.MarginBytes = BudgetMargin(d.BudgetBytes)
		p.UsableBytes = min(p.CapBytes, max(d.BudgetBytes-d.UsageBytes-p.MarginBytes, 0))
	default:
		p.Source = SourceHeap
		p.CapBytes = max(d.HeapBytes-DesktopReserve, 0)
		h := PlanHeadroom(p.CapBytes, d.WDDM)
		rule := RuleFloor
		if d.WDDM {
			rule = RuleWDDMFloor
			if h > HeadroomFloor {
				rule = RuleWDDMShare
			}
		}
		p.Headroom = Headroom{Bytes: h, Rule: rule}
		p.UsableBytes = max(p.CapBytes-h, 0)
	}
}

// chooseCtx sets the starting context: the request or the model's length, bounded by
// VKLLM_GPU_CTX_MAX and by the binding cap.
func (p *Plan) chooseCtx(in Input) {
	c := Ctx{Requested: in.Ctx.Requested, ModelLength: in.Model.CtxLength, Max: in.Ctx.Max, Strict: in.Ctx.Strict}
	c.Floor = in.Ctx.MinCtx
	if c.Floor <= 0 {
		c.Floor = DefaultMinCtx
	}
	if c.Floor < LeastCtx {
		c.Floor = LeastCtx
	}
	start := in.Ctx.Requested
	switch {
	case start > 0:
		c.StartFrom = "request"
	case in.Model.CtxLength > 0:
		start, c.StartFrom = in.Model.CtxLength, "model"
	default:
		start, c.StartFrom = DefaultCtx, "default"
	}
	if c.Max > 0 && start > c.Max {
		start, c.BoundBy = c.Max, "VKLLM_GPU_CTX_MAX"
	}
	if in.Device.MaxStorageBufferRange > 0 && in.KV.SidePerPos > 0 {
		c.BindingCap = int(in.Device.MaxStorageBufferRange / in.KV.SidePerPos)
		if start > c.BindingCap {
			start, c.BoundBy = c.BindingCap, "binding cap"
		}
	}
	c.Start = start
	p.Ctx = c
}

// decide arms at the starting context, or re-plans once at 7/8 of the room left after weights
// and scratch, or declines and plans the split.
func (p *Plan) decide(in Input) {
	c := &p.Ctx
	c.Chosen = c.Start
	p.NeedBytes = p.need(c.Start)
	if in.ForceSplit {
		p.Verdict = Verdict{Armed: false, Forced: true}
		p.split(in, c.Start)
		p.Verdict.Text = p.declineText()
		return
	}
	if c.Start < LeastCtx && c.BoundBy == "binding cap" {
		p.Verdict = Verdict{Armed: false}
		p.split(in, c.Start)
		p.KVBytes = int64(c.Start) * p.KV.PerPos
		p.Verdict.Text = fmt.Sprintf("resident driver declined - maxStorageBufferRange %d bytes holds %d positions of one KV side (%d bytes per position), under the least context %d",
			in.Device.MaxStorageBufferRange, c.BindingCap, in.KV.SidePerPos, LeastCtx)
		return
	}
	if p.NeedBytes <= p.UsableBytes {
		p.Verdict = Verdict{Armed: true}
		p.Verdict.Text = p.armText()
		return
	}
	room := p.UsableBytes - p.Weights.Bytes - p.Scratch.Total
	fit := 0
	if room > 0 && p.KV.PerPos > 0 {
		fit = int(room / 8 * 7 / p.KV.PerPos) // below Start: need(Start) > usable
	}
	c.FitCtx = fit
	if !c.Strict && fit >= c.Floor {
		c.Chosen, c.Replanned = fit, true
		p.Verdict = Verdict{Armed: true}
		p.Verdict.Text = p.armText()
		return
	}
	p.Verdict = Verdict{Armed: false}
	p.split(in, c.Start)
	p.Verdict.Text = p.declineText()
}

// need is the resident total at ctx positions.
func (p *Plan) need(ctx int) int64 {
	return p.Weights.Bytes + int64(ctx)*p.KV.PerPos + p.Scratch.Total
}

// split puts as many whole layers as fit on the GPU at ctx — the last ones, so the hidden state
// crosses from the CPU once per token — with the scratch, then the output head (and final norm)
// on the GPU when it fits in what is left, else on the CPU with the embedding table.
func (p *Plan) split(in Input, ctx int) {
	layers := in.Model.Layers
	perLayer := make([]int64, layers)
	var head int64
	var tiedEmbd int64
	hasOutput := false
	for _, u := range in.Uploads {
		switch {
		case u.Layer >= 0 && u.Layer < layers:
			perLayer[u.Layer] += u.Bytes
		case u.Kind == KindOutput || (u.Kind == KindNorm && u.Layer < 0):
			head += u.Bytes
			hasOutput = hasOutput || u.Kind == KindOutput
		case u.Kind == KindEmbd:
			tiedEmbd += u.Bytes
		}
	}
	if !hasOutput {
		head += tiedEmbd // tied embeddings: the table is the head
	}
	left := p.UsableBytes - p.Scratch.Total
	g := 0
	var placed int64
	kvLayer := int64(ctx) * p.KV.LayerPos
	for i := layers - 1; i >= 0 && left >= 0; i-- {
		b := perLayer[i] + kvLayer
		if b > left {
			break
		}
		left -= b
		placed += b
		g++
	}
	s := &Split{GPULayers: g, Layers: layers, FirstGPULayer: layers - g, Ctx: ctx, HeadBytes: head}
	s.OutputOnGPU = left >= 0 && head <= left
	if s.OutputOnGPU {
		placed += head
	}
	if placed > 0 {
		s.GPUBytes = placed + p.Scratch.Total
	}
	p.Split = s
}

func weighUploads(ups []Upload) Weights {
	w := Weights{ByKind: map[string]int64{}}
	for _, u := range ups {
		w.Bytes += u.Bytes
		w.ByKind[u.Kind] += u.Bytes
		w.Tensors++
	}
	return w
}
