package model

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

// SSMParams is the shape of a Gated DeltaNet layer ({arch}.ssm.* keys). Its queries and keys
// have KHeads heads, its values VHeads; every head is StateSize wide, and each value head keeps
// a StateSize×StateSize state carried from token to token.
type SSMParams struct {
	ConvKernel int // ssm.conv_kernel: taps of the causal convolution over q, k and v
	StateSize  int // ssm.state_size: the head size of queries, keys and values
	KHeads     int // ssm.group_count: query and key heads
	VHeads     int // ssm.time_step_rank: value heads (a multiple of KHeads)
}

// KeyDim is the width of one token's queries (and of its keys), KHeads*StateSize.
func (p SSMParams) KeyDim() int { return p.KHeads * p.StateSize }

// ValueDim is the width of one token's values, VHeads*StateSize.
func (p SSMParams) ValueDim() int { return p.VHeads * p.StateSize }

// ConvDim is the number of channels the convolution runs over: queries, keys and values.
func (p SSMParams) ConvDim() int { return 2*p.KeyDim() + p.ValueDim() }

// DeltaNet is one Gated DeltaNet block's weights (qwen35, qwen35moe).
type DeltaNet struct {
	QKV    Matrix    // attn_qkv.weight: ConvDim rows of Dim (every query, then key, then value head)
	Z      Matrix    // attn_gate.weight: ValueDim rows, the output gate z
	Conv   []float32 // ssm_conv1d.weight: per channel ConvKernel taps, the oldest input's first
	DtBias Vector    // ssm_dt.bias: per value head, added to alpha before the softplus
	A      Vector    // ssm_a: per value head, -exp(A_log) (negative: the decay's rate)
	Beta   Matrix    // ssm_beta.weight: VHeads rows, the write strength before its sigmoid
	Alpha  Matrix    // ssm_alpha.weight: VHeads rows, the decay's input
	Norm   Vector    // ssm_norm.weight: StateSize values, the gated RMS norm of each output head
	Out    Matrix    // ssm_out.weight: Dim rows of ValueDim
}

// loadQwen35 reads a qwen35-architecture model (Qwen3.5 dense): layers of Gated DeltaNet or
// gated attention (see loadHybrid) and a dense SwiGLU FFN in every layer.
func loadQwen35(f *gguf.File) (*Model, error) {
	m, w, err := loadHybrid(f, "qwen35")
	if err != nil {
		return nil, err
	}
	if err := loadDenseFFN(f, m, w); err != nil {
		return nil, err
	}
	return m, nil
}

// loadHybrid reads the Gated DeltaNet hybrids' blocks without their FFN weights. Every layer
// has attn_norm and, as the FFN's pre-norm, post_attention_norm (kept as FFNNorm). A recurrent
// layer (attention.recurrent_layers, or all but every full_attention_interval-th, default 4)
// has a DeltaNet; the others have gated attention: Q twice as wide (query and output gate per
// head), per-head Q and K RMS norms, NEOX RoPE over rope.dimension_count of the head's
// dimensions with rope.dimension_sections.
func loadHybrid(f *gguf.File, arch string) (*Model, *weights, error) {
	h, err := readHyper(f, arch)
	if err != nil {
		return nil, nil, err
	}
	h.Rope.Kind = RopeNeoX
	if err := readHybridHyper(f, &h); err != nil {
		return nil, nil, err
	}
	m, w, err := loadEnds(f, &h)
	if err != nil {
		return nil, nil, err
	}
	p := h.SSM
	for i := range m.Layers {
		l := &m.Layers[i]
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		l.AttnNorm = w.vector(blk("attn_norm.weight"), h.Dim)
		l.FFNNorm = w.vector(blk("post_attention_norm.weight"), h.Dim)
		if !h.IsRecurrent(i) {
			l.Q = w.matrix(blk("attn_q.weight"), h.Dim, 2*h.QDim())
			l.K = w.matrix(blk("attn_k.weight"), h.Dim, h.KDim())
			l.V = w.matrix(blk("attn_v.weight"), h.Dim, h.VDim())
			l.O = w.matrix(blk("attn_output.weight"), h.QDim(), h.Dim)
			l.QNorm = w.vector(blk("attn_q_norm.weight"), h.HeadDim)
			l.KNorm = w.vector(blk("attn_k_norm.weight"), h.HeadDim)
			continue
		}
		l.DeltaNet = &DeltaNet{
			QKV:    w.matrix(blk("attn_qkv.weight"), h.Dim, p.ConvDim()),
			Z:      w.matrix(blk("attn_gate.weight"), h.Dim, p.ValueDim()),
			Conv:   w.small(blk("ssm_conv1d.weight"), p.ConvKernel, p.ConvDim()),
			DtBias: w.vector(blk("ssm_dt.bias"), p.VHeads),
			A:      w.vector(blk("ssm_a"), p.VHeads),
			Beta:   w.matrix(blk("ssm_beta.weight"), h.Dim, p.VHeads),
			Alpha:  w.matrix(blk("ssm_alpha.weight"), h.Dim, p.VHeads),
			Norm:   w.vector(blk("ssm_norm.weight"), p.StateSize),
			Out:    w.matrix(blk("ssm_out.weight"), p.ValueDim(), h.Dim),
		}
	}
	if w.err != nil {
		return nil, nil, w.err
	}
	m.Hyper = h
	return m, w, nil
}

// readHybridHyper reads the ssm.* keys, the layer pattern and the rope sections into h and
// checks them against each other.
func readHybridHyper(f *gguf.File, h *Hyperparameters) error {
	key := func(k string) string { return h.Arch + "." + k }
	var inner int
	for _, k := range []struct {
		name string
		dst  *int
	}{
		{"ssm.conv_kernel", &h.SSM.ConvKernel},
		{"ssm.state_size", &h.SSM.StateSize},
		{"ssm.group_count", &h.SSM.KHeads},
		{"ssm.time_step_rank", &h.SSM.VHeads},
		{"ssm.inner_size", &inner},
	} {
		v, ok := f.Uint(key(k.name))
		if !ok {
			return fmt.Errorf("metadata key %s is missing or not an unsigned integer: a Gated DeltaNet model needs it", key(k.name))
		}
		if v == 0 || v > 1<<20 {
			return fmt.Errorf("metadata key %s = %d is out of range (1..%d)", key(k.name), v, 1<<20)
		}
		*k.dst = int(v)
	}
	p := h.SSM
	switch {
	case p.VHeads%p.KHeads != 0:
		return fmt.Errorf("%s = %d is not a multiple of %s = %d", key("ssm.time_step_rank"), p.VHeads, key("ssm.group_count"), p.KHeads)
	case inner != p.ValueDim():
		return fmt.Errorf("%s = %d, want %s × %s = %d", key("ssm.inner_size"), inner, key("ssm.time_step_rank"), key("ssm.state_size"), p.ValueDim())
	case p.ConvKernel < 2:
		return fmt.Errorf("%s = %d: the convolution needs at least 2 taps", key("ssm.conv_kernel"), p.ConvKernel)
	case h.ValueDim != h.HeadDim:
		return fmt.Errorf("attention.value_length %d differs from key_length %d: the gated attention needs them equal", h.ValueDim, h.HeadDim)
	}

	h.Recurrent = make([]bool, h.Layers)
	if v, ok := f.Get(key("attention.recurrent_layers")); ok {
		arr, isArr := v.AsArray()
		if !isArr || len(arr) != h.Layers {
			return fmt.Errorf("metadata key %s is not an array of %d booleans", key("attention.recurrent_layers"), h.Layers)
		}
		for i, e := range arr {
			b, isBool := e.AsBool()
			if !isBool {
				return fmt.Errorf("metadata key %s[%d] is not a boolean", key("attention.recurrent_layers"), i)
			}
			h.Recurrent[i] = b
		}
	} else {
		interval := 4
		if v, present := f.Get(key("full_attention_interval")); present {
			n, ok := v.AsUint()
			if !ok || n == 0 || n > 1<<20 {
				return fmt.Errorf("metadata key %s = %v is not a positive integer", key("full_attention_interval"), v)
			}
			interval = int(n)
		}
		for i := range h.Recurrent {
			h.Recurrent[i] = (i+1)%interval != 0
		}
	}

	secs, ok := f.Int32s(key("rope.dimension_sections"))
	if !ok || len(secs) < 4 {
		return fmt.Errorf("metadata key %s is missing or not an array of 4 integers", key("rope.dimension_sections"))
	}
	total := 0
	for i := range h.Rope.Sections {
		if secs[i] < 0 || secs[i] > 1<<16 {
			return fmt.Errorf("%s[%d] = %d is out of range", key("rope.dimension_sections"), i, secs[i])
		}
		h.Rope.Sections[i] = int(secs[i])
		total += int(secs[i])
	}
	if total == 0 {
		return fmt.Errorf("%s is all zeros: no pair would be rotated", key("rope.dimension_sections"))
	}
	return nil
}

// small returns the 2-D tensor name of rows rows of cols elements dequantized to float32,
// row-major (a convolution's taps: too small to multiply as a quantized matrix).
func (w *weights) small(name string, cols, rows int) []float32 {
	if w.err != nil {
		return nil
	}
	t, ok := w.f.Tensor(name)
	if !ok {
		w.err = fmt.Errorf("tensor %q is missing", name)
		return nil
	}
	if len(t.Dims) != 2 || int(t.Dims[0]) != cols || int(t.Dims[1]) != rows {
		w.err = fmt.Errorf("tensor %q has shape %v, want [%d %d]", name, t.Dims, cols, rows)
		return nil
	}
	vals := make([]float32, cols*rows)
	if t.Absent { // a header-only file (gguf.OpenHeader): zeros stand for the values it lacks
		return vals
	}
	if err := quant.Dequantize(t.Type, t.Data, vals); err != nil {
		w.err = fmt.Errorf("tensor %q: %w", name, err)
		return nil
	}
	return vals
}
