package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
)

// Plan is the decision and everything it was made from. The same struct renders the verdict
// line (Verdict.Text), the full breakdown (Breakdown), the JSON for the UI and `vkllm plan
// --json` (field names are stable), and the structured log line (Log).
type Plan struct {
	Model       Model    `json:"model"`
	Device      Device   `json:"device"`
	Weights     Weights  `json:"weights"`
	KV          KV       `json:"kv"`
	KVBytes     int64    `json:"kv_bytes"` // at the chosen context
	Scratch     Scratch  `json:"scratch"`
	Headroom    Headroom `json:"headroom"`
	MarginBytes int64    `json:"budget_margin_bytes"` // kept below a reported budget − usage
	Source      string   `json:"source"`              // heap | budget | pin
	Pin         Pin      `json:"pin"`
	CapBytes    int64    `json:"cap_bytes"`
	UsableBytes int64    `json:"usable_bytes"`
	NeedBytes   int64    `json:"need_bytes"` // weights + KV + scratch at the starting context
	Ctx         Ctx      `json:"ctx"`
	Verdict     Verdict  `json:"verdict"`
	Split       *Split   `json:"split,omitempty"` // set when declined
}

// Weights sums the upload list.
type Weights struct {
	Bytes   int64            `json:"bytes"`
	Tensors int              `json:"tensors"`
	ByKind  map[string]int64 `json:"by_kind_bytes"`
}

// Headroom is what the plan keeps free of the cap and the rule that set it.
type Headroom struct {
	Bytes int64  `json:"bytes"`
	Rule  string `json:"rule"`
}

// Ctx records how the context was chosen.
type Ctx struct {
	Requested   int    `json:"requested"`
	ModelLength int    `json:"model_length"`
	StartFrom   string `json:"start_from"` // request | model | default
	Max         int    `json:"max"`        // VKLLM_GPU_CTX_MAX, 0 = none
	BindingCap  int    `json:"binding_cap"`
	BoundBy     string `json:"bound_by,omitempty"` // what lowered the start: VKLLM_GPU_CTX_MAX | binding cap
	Start       int    `json:"start"`
	Floor       int    `json:"floor"`
	FitCtx      int    `json:"fit"` // 7/8 of the room left after weights and scratch, in positions; 0 when it fit at once
	Replanned   bool   `json:"replanned"`
	Strict      bool   `json:"strict"`
	Chosen      int    `json:"chosen"`
}

// Verdict is arm or decline, with the exact line.
type Verdict struct {
	Armed  bool   `json:"armed"`
	Forced bool   `json:"forced_split"` // VKLLM_GPU_RESIDENT=0
	Text   string `json:"text"`
}

// Split is the partial offload the fallback runs.
type Split struct {
	GPULayers     int   `json:"gpu_layers"`
	Layers        int   `json:"layers"`
	FirstGPULayer int   `json:"first_gpu_layer"` // the GPU runs layers [first_gpu_layer, layers)
	OutputOnGPU   bool  `json:"output_on_gpu"`
	HeadBytes     int64 `json:"head_bytes"`
	GPUBytes      int64 `json:"gpu_bytes"` // layers + their KV + head if there + scratch
	Ctx           int   `json:"ctx"`
}

// Text is the split line: "split: 22 of 32 layers on GPU".
func (s Split) Text() string {
	return fmt.Sprintf("split: %d of %d layers on GPU", s.GPULayers, s.Layers)
}

// MBUp converts bytes to MiB rounding up (needs and reservations).
func MBUp(b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (b + MiB - 1) / MiB
}

// MBDown converts bytes to MiB rounding down (what there is).
func MBDown(b int64) int64 {
	if b <= 0 {
		return 0
	}
	return b / MiB
}

func (p *Plan) armText() string {
	p.KVBytes = int64(p.Ctx.Chosen) * p.KV.PerPos
	kvType := p.KV.Type
	if kvType == "" {
		kvType = KVTypeF16
	}
	return fmt.Sprintf("resident driver armed (%d layers%s, dim %d, ctx %d, kv %s) - weights %d MB + KV %d MB + scratch %d MB of %d MB (%s)",
		p.Model.Layers, p.Model.expertsText(), p.Model.Embd, p.Ctx.Chosen, kvType,
		MBUp(p.Weights.Bytes), MBUp(p.KVBytes), MBUp(p.Scratch.Total), MBDown(p.UsableBytes), p.sourceText())
}

// expertsText is ", 128 experts (8 used)" for a mixture of experts, "" for a dense model.
func (m Model) expertsText() string {
	if !m.MoE() {
		return ""
	}
	return fmt.Sprintf(", %d experts (%d used)", m.Experts, m.ExpertsUsed)
}

func (p *Plan) declineText() string {
	p.KVBytes = int64(p.Ctx.Chosen) * p.KV.PerPos
	need, usable := MBUp(p.NeedBytes), MBDown(p.UsableBytes)
	if p.Verdict.Forced {
		return fmt.Sprintf("resident driver declined - VKLLM_GPU_RESIDENT=0 forces the partial offload (resident it needs %d MB of %d MB at ctx %d)", need, usable, p.Ctx.Start)
	}
	if p.Ctx.FitCtx >= LeastCtx {
		return fmt.Sprintf("resident driver declined - needs %d MB of %d MB at ctx %d - would fit at ctx %d", need, usable, p.Ctx.Start, p.Ctx.FitCtx) + p.roomSuffix()
	}
	return fmt.Sprintf("resident driver declined - needs %d MB of %d MB (weights alone %d MB)", need, usable, MBUp(p.Weights.Bytes)) + p.roomSuffix()
}

// sourceText says where the usable figure came from, for the armed line.
func (p *Plan) sourceText() string {
	switch p.Source {
	case SourcePin:
		switch p.Pin.Source {
		case PinEnv:
			return "pinned by VKLLM_GPU_VRAM_MB"
		case PinFlag:
			return "pinned by --vram-mb"
		default:
			return "pinned for this GPU"
		}
	case SourceBudget:
		if p.UsableBytes == p.CapBytes {
			return fmt.Sprintf("heap %d MB - %d MB reserve, under the driver's reported room", MBDown(p.Device.HeapBytes), MBUp(DesktopReserve))
		}
		return fmt.Sprintf("budget %d MB - usage %d MB - margin %d MB", MBDown(p.Device.BudgetBytes), MBUp(p.Device.UsageBytes), MBUp(p.MarginBytes))
	}
	wddm := ""
	if p.Headroom.Rule == RuleWDDMShare || p.Headroom.Rule == RuleWDDMFloor {
		wddm = "WDDM "
	}
	return fmt.Sprintf("heap %d MB - %d MB reserve - %d MB %sheadroom", MBDown(p.Device.HeapBytes), MBUp(DesktopReserve), MBUp(p.Headroom.Bytes), wddm)
}

// roomSuffix names the headroom that stood, its source, and the pin as the remedy.
func (p *Plan) roomSuffix() string {
	const remedy = "VKLLM_GPU_VRAM_MB=<MiB> pins the cap"
	switch p.Source {
	case SourcePin:
		switch p.Pin.Source {
		case PinEnv:
			return fmt.Sprintf(" - VKLLM_GPU_VRAM_MB pins the cap at %d MB, so no headroom stands; raise it or unset it to plan from the device", p.Pin.MB)
		case PinFlag:
			return fmt.Sprintf(" - --vram-mb pins the cap at %d MB, so no headroom stands; raise it or drop it to plan from the device", p.Pin.MB)
		default:
			return fmt.Sprintf(" - the pin for this GPU sets the cap at %d MB, so no headroom stands; vkllm pin set --device %d --mb <MiB> raises it, vkllm pin clear removes it", p.Pin.MB, p.Device.Index)
		}
	case SourceBudget:
		return fmt.Sprintf(" - the driver reported %d MB budget and %d MB in use, so a %d MB margin stands as headroom; %s", MBDown(p.Device.BudgetBytes), MBUp(p.Device.UsageBytes), MBUp(p.MarginBytes), remedy)
	}
	switch p.Headroom.Rule {
	case RuleWDDMShare:
		return fmt.Sprintf(" - no driver reported free memory, so %d MB stands as headroom (27%% of the cap under WDDM); %s", MBUp(p.Headroom.Bytes), remedy)
	case RuleWDDMFloor:
		return fmt.Sprintf(" - no driver reported free memory, so %d MB stands as headroom (the 2 GiB floor under WDDM); %s", MBUp(p.Headroom.Bytes), remedy)
	}
	return fmt.Sprintf(" - no driver reported free memory, so %d MB stands as headroom; %s", MBUp(p.Headroom.Bytes), remedy)
}

// JSON is the plan as `vkllm plan --json` prints it and the UI reads it.
func (p Plan) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	return b, nil
}

// Attrs is the structured form of the decision, in the groups weights, kv, scratch, headroom,
// source, pin, verdict (MB figures as the verdict prints them).
func (p Plan) Attrs() []slog.Attr {
	kinds := make([]any, 0, len(p.Weights.ByKind)+2)
	kinds = append(kinds, slog.Int64("mb", MBUp(p.Weights.Bytes)), slog.Int("tensors", p.Weights.Tensors))
	for _, k := range sortedKinds(p.Weights.ByKind) {
		kinds = append(kinds, slog.Int64(k+"_mb", MBUp(p.Weights.ByKind[k])))
	}
	verdict := []any{slog.Bool("armed", p.Verdict.Armed), slog.Int("ctx", p.Ctx.Chosen), slog.Int64("usable_mb", MBDown(p.UsableBytes)), slog.Int64("need_mb", MBUp(p.NeedBytes)), slog.String("text", p.Verdict.Text)}
	if p.Split != nil {
		verdict = append(verdict, slog.String("split", p.Split.Text()))
	}
	return []slog.Attr{
		slog.Group("weights", kinds...),
		slog.Group("kv", slog.String("type", p.KV.Type), slog.Int64("per_pos_bytes", p.KV.PerPos), slog.Int64("mb", MBUp(p.KVBytes)), slog.Int("ctx", p.Ctx.Chosen), slog.Int("binding_cap", p.Ctx.BindingCap)),
		slog.Group("scratch", slog.Int64("mb", MBUp(p.Scratch.Total)), slog.Int("window", p.Scratch.Window)),
		slog.Group("headroom", slog.Int64("mb", MBUp(p.Headroom.Bytes)), slog.String("rule", p.Headroom.Rule)),
		slog.Group("source", slog.String("kind", p.Source), slog.Int64("cap_mb", MBDown(p.CapBytes)), slog.Int64("heap_mb", MBDown(p.Device.HeapBytes)), slog.Bool("budget_reported", p.Device.BudgetReported), slog.Bool("wddm", p.Device.WDDM)),
		slog.Group("pin", slog.Int("mb", p.Pin.MB), slog.String("from", p.Pin.Source)),
		slog.Group("verdict", verdict...),
	}
}

// Log writes the one structured line that answers "why did it go to the CPU?".
func (p Plan) Log(ctx context.Context, logger *slog.Logger) {
	level := slog.LevelInfo
	if !p.Verdict.Armed {
		level = slog.LevelWarn
	}
	logger.LogAttrs(ctx, level, "resident plan", p.Attrs()...)
}

// Breakdown is the full human report `vkllm plan` prints.
func (p Plan) Breakdown() string {
	var b strings.Builder
	row := func(k, format string, args ...any) { fmt.Fprintf(&b, "%-9s %s\n", k, fmt.Sprintf(format, args...)) }
	m := p.Model
	experts := ""
	if m.MoE() {
		experts = fmt.Sprintf(", %d experts of width %d, %d used per token", m.Experts, m.ExpertFF, m.ExpertsUsed)
		if m.SharedFF > 0 {
			experts += fmt.Sprintf(", a shared expert of width %d", m.SharedFF)
		}
	}
	row("model", "%s (%s, %d layers, dim %d, %d heads / %d KV heads%s, vocab %d, context length %d)", m.Name, m.Arch, m.Layers, m.Embd, m.Heads, m.HeadsKV, experts, m.Vocab, m.CtxLength)
	if m.HeaderOnly {
		row("file", "header only: the weights are absent or cut short, which does not change the plan (loading needs the whole file)")
	}
	var kinds []string
	for _, k := range sortedKinds(p.Weights.ByKind) {
		kinds = append(kinds, fmt.Sprintf("%s %d MB", k, MBUp(p.Weights.ByKind[k])))
	}
	row("weights", "%d MB (%d bytes) in %d tensors (%s)", MBUp(p.Weights.Bytes), p.Weights.Bytes, p.Weights.Tensors, strings.Join(kinds, ", "))
	row("kv", "%s, %d bytes per position (one side %d), %d MB (%d bytes) at ctx %d", p.KV.Type, p.KV.PerPos, p.KV.SidePerPos, MBUp(p.KVBytes), p.KVBytes, p.Ctx.Chosen)
	if m := p.Model; m.RecurrentLayers > 0 {
		row("layers", "%d attention layers keep K and V; %d recurrent (DeltaNet) layers keep a %d KB state each instead",
			m.AttentionLayers(), m.RecurrentLayers, (m.RecurrentLayerBytes()+1023)/1024)
	}
	s := p.Scratch
	recurrent := ""
	if s.RecurrentState > 0 {
		recurrent = fmt.Sprintf(", recurrent state %d MB", MBUp(s.RecurrentState))
	}
	if s.WeightStaging > 0 {
		recurrent += fmt.Sprintf(", fp16 weight staging %d MB", MBUp(s.WeightStaging))
	}
	row("scratch", "%d MB (window %d: activations %d MB, logits %d MB, attention partials %d MB%s, slack %d MB)", MBUp(s.Total), s.Window, MBUp(s.Activations), MBUp(s.Logits), MBUp(s.AttnPartials), recurrent, MBUp(s.Slack))
	d := p.Device
	assumed := ""
	if d.Assumed {
		assumed = " (assumed by what-if flags)"
	}
	name := d.Name
	if name == "" {
		name = "device"
	}
	if d.Assumed {
		row("device", "%s%s, WDDM %s", name, assumed, yesNo(d.WDDM))
	} else {
		row("device", "#%d %s, WDDM %s", d.Index, name, yesNo(d.WDDM))
	}
	row("heap", "%d MB largest device-local heap", MBDown(d.HeapBytes))
	if d.BudgetReported {
		row("budget", "%d MB, usage %d MB (margin %d MB = 1/16 of the budget, 512..2048 MB)", MBDown(d.BudgetBytes), MBUp(d.UsageBytes), MBUp(BudgetMargin(d.BudgetBytes)))
	} else {
		row("budget", "not reported")
	}
	if d.MaxStorageBufferRange > 0 {
		row("range", "maxStorageBufferRange %d bytes: binding cap %d positions", d.MaxStorageBufferRange, p.Ctx.BindingCap)
	} else {
		row("range", "maxStorageBufferRange unknown: no binding cap")
	}
	switch {
	case p.Pin.MB > 0:
		extra := ""
		if p.Pin.StoredMB > 0 && p.Pin.Source != PinStore {
			extra = fmt.Sprintf(", overriding the stored pin of %d MB for this GPU", p.Pin.StoredMB)
		}
		row("pin", "%d MB from %s%s", p.Pin.MB, pinFrom(p.Pin.Source), extra)
		row("cap", "%d MB (the pin)", MBDown(p.CapBytes))
	default:
		row("pin", "none")
		row("cap", "%d MB (heap - %d MB desktop reserve)", MBDown(p.CapBytes), MBUp(DesktopReserve))
	}
	row("headroom", "%d MB (%s)", MBUp(p.Headroom.Bytes), p.Headroom.Rule)
	row("usable", "%d MB (%s)", MBDown(p.UsableBytes), p.sourceText())
	c := p.Ctx
	notes := []string{fmt.Sprintf("start %d from the %s", c.Start, c.StartFrom)}
	if c.BoundBy != "" {
		notes = append(notes, "bounded by the "+c.BoundBy)
	}
	if c.Max > 0 {
		notes = append(notes, fmt.Sprintf("VKLLM_GPU_CTX_MAX %d", c.Max))
	}
	if c.BindingCap > 0 {
		notes = append(notes, fmt.Sprintf("binding cap %d", c.BindingCap))
	}
	notes = append(notes, fmt.Sprintf("floor %d", c.Floor))
	if c.Replanned {
		notes = append(notes, "re-planned at 7/8 of the room after weights and scratch")
	}
	if c.Strict {
		notes = append(notes, "strict")
	}
	row("ctx", "%d (%s)", c.Chosen, strings.Join(notes, ", "))
	row("need", "%d MB at ctx %d", MBUp(p.NeedBytes), c.Start)
	row("verdict", "%s", p.Verdict.Text)
	if p.Split != nil {
		sp := p.Split
		which := "none"
		if sp.GPULayers > 0 {
			which = fmt.Sprintf("layers %d..%d", sp.FirstGPULayer, sp.Layers-1)
		}
		row("split", "%d of %d layers on GPU (%s), output head on %s, %d MB on GPU at ctx %d", sp.GPULayers, sp.Layers, which, gpuCPU(sp.OutputOnGPU), MBUp(sp.GPUBytes), sp.Ctx)
	}
	return b.String()
}

func pinFrom(src string) string {
	switch src {
	case PinEnv:
		return "VKLLM_GPU_VRAM_MB"
	case PinFlag:
		return "--vram-mb"
	}
	return "the pin store (vkllm pin)"
}

func gpuCPU(gpu bool) string {
	if gpu {
		return "GPU"
	}
	return "CPU"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func sortedKinds(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
