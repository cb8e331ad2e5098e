package plan

// Model is the shape of a model as the plan needs it, read from GGUF metadata by the adapter
// (engine/plan/planinput) or written by hand in tests and what-if tools.
type Model struct {
	Name      string `json:"name"`
	Arch      string `json:"arch"`
	Layers    int    `json:"layers"`
	Embd      int    `json:"dim"`
	FF        int    `json:"ff"`
	Heads     int    `json:"heads"`
	HeadsKV   int    `json:"heads_kv"`
	HeadDimK  int    `json:"head_dim_k"`
	HeadDimV  int    `json:"head_dim_v"`
	Vocab     int    `json:"vocab"`
	CtxLength int    `json:"ctx_length"` // the model's training context; 0 when the file omits it
	// HeaderOnly says the plan was made from a file that holds its header but not (all of) its
	// weights: a header-only file or a download cut short. The plan is the same either way.
	HeaderOnly bool `json:"header_only,omitempty"`

	// mixture of experts (qwen3moe); zero for a dense model
	Experts     int `json:"experts,omitempty"`      // expert_count
	ExpertsUsed int `json:"experts_used,omitempty"` // expert_used_count
	ExpertFF    int `json:"expert_ff,omitempty"`    // expert_feed_forward_length: one expert's gate/up rows
	SharedFF    int `json:"shared_ff,omitempty"`    // the shared expert's width, 0 when the model has none

	// Gated-DeltaNet hybrids (qwen35, qwen35moe); zero for a model whose every layer is attention.
	// A recurrent layer keeps a fixed state instead of a KV cache: its conv1d's last
	// ConvKernel-1 inputs (conv_dim = 2·groups·state + heads_v·state values) and one
	// state×state delta-rule matrix per value head, all f32.
	RecurrentLayers int `json:"recurrent_layers,omitempty"` // layers that are DeltaNet blocks
	SSMConvKernel   int `json:"ssm_conv_kernel,omitempty"`  // ssm.conv_kernel
	SSMState        int `json:"ssm_state,omitempty"`        // ssm.state_size: a head's key (and value) width
	SSMGroups       int `json:"ssm_groups,omitempty"`       // ssm.group_count: query/key heads
	SSMHeadsV       int `json:"ssm_heads_v,omitempty"`      // ssm.time_step_rank: value heads
	// AttnGate says the attention layers' query projection also carries an output gate
	// (twice as wide), as the hybrids' gated attention does.
	AttnGate bool `json:"attn_gate,omitempty"`
}

// AttentionLayers is how many layers keep K and V: every layer but the recurrent ones.
func (m Model) AttentionLayers() int { return m.Layers - m.RecurrentLayers }

// SSMConvDim is the width of a recurrent layer's conv1d: q and k (groups·state each) and v.
func (m Model) SSMConvDim() int64 {
	return 2*int64(m.SSMGroups)*int64(m.SSMState) + int64(m.SSMHeadsV)*int64(m.SSMState)
}

// RecurrentLayerBytes is one recurrent layer's state: (conv_kernel-1)·conv_dim for the conv1d
// plus heads_v·state² for the delta rule, f32.
func (m Model) RecurrentLayerBytes() int64 {
	if m.RecurrentLayers == 0 {
		return 0
	}
	conv := int64(max(m.SSMConvKernel-1, 0)) * m.SSMConvDim()
	delta := int64(m.SSMHeadsV) * int64(m.SSMState) * int64(m.SSMState)
	return 4 * (conv + delta)
}

// MoE reports whether the model's FFN is a mixture of experts.
func (m Model) MoE() bool { return m.Experts > 0 }

// KVTypeF16 is the one cache type the resident driver keeps: f16, two bytes per element.
const KVTypeF16 = "f16"

// KV is the cache's size per context position.
type KV struct {
	Type       string `json:"type"`
	PerPos     int64  `json:"per_pos_bytes"`       // Σ over layers of K row + V row bytes
	LayerPos   int64  `json:"layer_per_pos_bytes"` // one layer's K+V row bytes
	SidePerPos int64  `json:"side_per_pos_bytes"`  // the larger of the K side and the V side over all layers
}

// KVFor computes the f16 cache bytes per position over the layers that keep K and V (every
// layer but a hybrid's recurrent ones): a K row is heads_kv*head_dim_k*2 bytes, a V row
// heads_kv*head_dim_v*2 bytes. The driver keeps
// all layers' K in one buffer and all layers' V in another, so one side's bytes per position
// bound the context through maxStorageBufferRange.
func KVFor(m Model) KV {
	k := int64(m.HeadsKV) * int64(m.HeadDimK) * 2
	v := int64(m.HeadsKV) * int64(m.HeadDimV) * 2
	side := k
	if v > side {
		side = v
	}
	layers := int64(m.AttentionLayers())
	return KV{Type: KVTypeF16, PerPos: layers * (k + v), LayerPos: k + v, SidePerPos: layers * side}
}

// Scratch window and slack. The scratch estimate is deliberately high: it is sized once at
// init, and an estimate that is too low fails at upload time instead of in the plan.
const (
	ScratchWindow = 512      // prefill rows per window
	ScratchSplits = 16       // split-K partitions the flash-attention partials are sized for
	ScratchSlack  = 64 << 20 // fixed slack: position/argmax/descriptor-side buffers, alignment
)

// Scratch is the device scratch the resident driver allocates once, by component.
type Scratch struct {
	Window       int   `json:"window"`
	Activations  int64 `json:"activations_bytes"`
	Logits       int64 `json:"logits_bytes"`
	AttnPartials int64 `json:"attn_partials_bytes"`
	// RecurrentState is a hybrid's recurrent layers' state and its snapshots
	// (RecurrentStateCopies × Model.RecurrentLayerBytes each): allocated once, whatever the
	// context, so it is planned with the scratch.
	RecurrentState int64 `json:"recurrent_state_bytes,omitempty"`
	// WeightStaging is the fp16 copy of weight rows a prefill product stages for NVIDIA's
	// cooperative matrix 2 GEMM (WeightStagingBytes, only where Device.StagesWeights).
	WeightStaging int64 `json:"weight_staging_bytes,omitempty"`
	Slack         int64 `json:"slack_bytes"`
	Total         int64 `json:"bytes"`
}

// WeightStagingBytes is the fp16 staging buffer of a device that stages prefill weights, two
// alternating halves: a product dequantizes as many of its rows as a half holds (at least 64 of
// any row length up to 1M elements) and multiplies them while the next rows are dequantized
// into the other half, so one fixed size serves every model.
const WeightStagingBytes = 256 * MiB

// WithWeightStaging adds the staging buffer to s where the device stages prefill weights.
func (s Scratch) WithWeightStaging(stages bool) Scratch {
	if stages && s.WeightStaging == 0 {
		s.WeightStaging = WeightStagingBytes
		s.Total += s.WeightStaging
	}
	return s
}

// RecurrentStateCopies is how many copies of a recurrent layer's state the GPU holds: the live
// one, and the snapshot slots it rewinds from (before and after the last token of the latest
// prompt).
const RecurrentStateCopies = 3

// ScratchFor is the scratch formula, all buffers f32 (4 bytes), R = ScratchWindow rows:
//
//	activations   = R × 4 × (3·dim + heads·head_dim_k + 2·heads_kv·max(head_dim_k, head_dim_v) + 2·ff)
//	                (residual, normed input, attention/FFN output; q, k, v; gate and up)
//	                a mixture of experts: ff = max(used·expert_ff, shared_ff) (gate and up of
//	                every row's every selected expert), plus R × 4 × (experts + 2·used + used·dim)
//	                (router logits, selected ids and weights, each selected expert's output);
//	                a hybrid adds R × 4 × heads·head_dim_k (the attention's output gate) and, with
//	                recurrent layers, R × 4 × (conv_dim + 3·heads_v·state + 4·heads_v) (the conv's
//	                input and output, the delta rule's output and gate z, per-head decay and beta)
//	recurrent     = RecurrentStateCopies × recurrent layers × RecurrentLayerBytes
//	                (the live state and the resident driver's two snapshot slots)
//	logits        = R × 4 × vocab   (every row of a window, for callers that want all logits)
//	attn partials = R × 4 × heads × (head_dim_v + 2) × ScratchSplits   (running max, sum, output per split)
//	slack         = ScratchSlack (64 MiB)
//
// A device that stages prefill weights as fp16 adds WeightStagingBytes (WithWeightStaging).
func ScratchFor(m Model) Scratch {
	const f32 = 4
	r := int64(ScratchWindow)
	hd := int64(m.HeadDimK)
	if int64(m.HeadDimV) > hd {
		hd = int64(m.HeadDimV)
	}
	ff := int64(m.FF)
	var routing int64
	if m.MoE() {
		ff = max(int64(m.ExpertsUsed)*int64(m.ExpertFF), int64(m.SharedFF))
		routing = r * f32 * (int64(m.Experts) + 2*int64(m.ExpertsUsed) + int64(m.ExpertsUsed)*int64(m.Embd))
	}
	act := r*f32*(3*int64(m.Embd)+int64(m.Heads)*int64(m.HeadDimK)+2*int64(m.HeadsKV)*hd+2*ff) + routing
	if m.AttnGate {
		act += r * f32 * int64(m.Heads) * int64(m.HeadDimK)
	}
	if m.RecurrentLayers > 0 {
		hv := int64(m.SSMHeadsV)
		act += r * f32 * (m.SSMConvDim() + 3*hv*int64(m.SSMState) + 4*hv)
	}
	logits := r * f32 * int64(m.Vocab)
	partials := r * f32 * int64(m.Heads) * (int64(m.HeadDimV) + 2) * ScratchSplits
	recurrent := RecurrentStateCopies * int64(m.RecurrentLayers) * m.RecurrentLayerBytes()
	s := Scratch{Window: ScratchWindow, Activations: act, Logits: logits, AttnPartials: partials, RecurrentState: recurrent, Slack: ScratchSlack}
	s.Total = act + logits + partials + recurrent + s.Slack
	return s
}
