package model

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

// Gating is how a mixture-of-experts router turns its logits into expert weights; the values
// are GGUF's {arch}.expert_gating_func ids.
type Gating int

const (
	// GatingSoftmax: softmax over all experts' logits, the top k probabilities are the weights.
	GatingSoftmax Gating = 1
	// GatingSigmoid: sigmoid of each logit, the top k of those are the weights.
	GatingSigmoid Gating = 2
	// GatingSoftmaxSelected: the top k logits are chosen, a softmax over just those gives the
	// weights.
	GatingSoftmaxSelected Gating = 3
)

func (g Gating) String() string {
	switch g {
	case GatingSoftmax:
		return "softmax"
	case GatingSigmoid:
		return "sigmoid"
	case GatingSoftmaxSelected:
		return "softmax over the selected"
	}
	return fmt.Sprintf("gating(%d)", int(g))
}

// MoEParams are a mixture-of-experts model's routing constants ({arch}.expert_* keys). Experts
// is 0 for a dense model.
type MoEParams struct {
	Experts      int     // expert_count
	Used         int     // expert_used_count: experts each token runs
	FFN          int     // expert_feed_forward_length: rows of one expert's gate and up
	SharedFFN    int     // expert_shared_feed_forward_length: the shared expert's width, 0 when none
	Gating       Gating  // expert_gating_func
	NormWeights  bool    // expert_weights_norm: the selected weights are divided by their sum
	WeightsScale float32 // expert_weights_scale: a factor on the weights (1 when absent)
}

// Experts is one 3-D expert tensor, GGUF shape [Cols, Rows, Count]: Count matrices of Rows rows
// of Cols elements, stored one after another.
type Experts struct {
	Name     string
	Type     quant.Type
	Count    int
	Rows     int
	Cols     int
	Matrices []Matrix // Matrices[e] is expert e's rows, a view of the tensor's data
	Info     *gguf.TensorInfo
}

// MoE is a layer's mixture-of-experts feed-forward block: a router picks MoEParams.Used of the
// experts per token, each runs its SwiGLU FFN, and their outputs are summed by the router's
// weights (plus a shared expert where the model has one).
type MoE struct {
	Router         Matrix        // ffn_gate_inp.weight: one row of Dim per expert
	Gate, Up, Down Experts       // ffn_gate_exps, ffn_up_exps (FFN rows of Dim), ffn_down_exps (Dim rows of FFN)
	Shared         *SharedExpert // nil when the model has none
}

// SharedExpert is an FFN every token runs beside the routed experts; its output is scaled by
// sigmoid(Gating · x) (qwen2moe, qwen3next and the qwen35moe hybrids; llama.cpp's qwen2moe
// writes the sigmoid as silu(g)/g, which differs in the last bit at most).
type SharedExpert struct {
	Gate, Up, Down Matrix // ffn_gate_shexp, ffn_up_shexp (SharedFFN rows of Dim), ffn_down_shexp
	Gating         Matrix // ffn_gate_inp_shexp.weight: one row of Dim
}

// readMoEParams reads the expert_* keys of arch. For keys a file leaves out the defaults are
// llama.cpp's, which it hard-codes per architecture: softmax gating, no scale, expert FFN
// feed_forward_length/Used, the shared expert feed_forward_length wide, and the selected weights
// renormalised to sum 1 when normWeights (qwen3moe, qwen35moe; not qwen2moe).
func readMoEParams(f *gguf.File, h Hyperparameters, normWeights bool) (MoEParams, error) {
	key := func(k string) string { return h.Arch + "." + k }
	p := MoEParams{Gating: GatingSoftmax, NormWeights: normWeights, WeightsScale: 1}
	count := func(k string, dst *int, def int) error {
		*dst = def
		if _, present := f.Get(key(k)); !present {
			return nil
		}
		v, ok := f.Uint(key(k))
		if !ok {
			return fmt.Errorf("metadata key %s is not an unsigned integer", key(k))
		}
		if v == 0 || v > 1<<20 {
			return fmt.Errorf("metadata key %s = %d is out of range (1..%d)", key(k), v, 1<<20)
		}
		*dst = int(v)
		return nil
	}
	if _, ok := f.Get(key("expert_count")); !ok {
		return p, fmt.Errorf("metadata key %s is missing: a mixture-of-experts model needs it", key("expert_count"))
	}
	if _, ok := f.Get(key("expert_used_count")); !ok {
		return p, fmt.Errorf("metadata key %s is missing: a mixture-of-experts model needs it", key("expert_used_count"))
	}
	if err := count("expert_count", &p.Experts, 0); err != nil {
		return p, err
	}
	if err := count("expert_used_count", &p.Used, 0); err != nil {
		return p, err
	}
	if p.Used > p.Experts {
		return p, fmt.Errorf("%s = %d exceeds %s = %d: a token cannot use more experts than there are; the file is corrupt",
			key("expert_used_count"), p.Used, key("expert_count"), p.Experts)
	}
	if err := count("expert_feed_forward_length", &p.FFN, h.FFN/p.Used); err != nil {
		return p, err
	}
	if p.FFN == 0 {
		return p, fmt.Errorf("metadata keys %s and %s are both missing: the experts' width is unknown",
			key("expert_feed_forward_length"), key("feed_forward_length"))
	}
	if err := count("expert_shared_feed_forward_length", &p.SharedFFN, h.FFN); err != nil {
		return p, err
	}
	if n, ok := f.Uint(key("expert_group_count")); ok && n > 1 {
		return p, fmt.Errorf("%s = %d: grouped expert selection is not supported", key("expert_group_count"), n)
	}
	if v, ok := f.Get(key("expert_gating_func")); ok {
		g, isUint := f.Uint(key("expert_gating_func"))
		switch {
		case !isUint:
			return p, fmt.Errorf("metadata key %s = %v is not an unsigned integer", key("expert_gating_func"), v)
		case g == 0: // llama.cpp's "none": the architecture's default
		case g <= 3:
			p.Gating = Gating(g)
		default:
			return p, fmt.Errorf("%s = %d is not supported (supported: 1 softmax, 2 sigmoid, 3 softmax over the selected)", key("expert_gating_func"), g)
		}
	}
	if _, ok := f.Get(key("expert_weights_norm")); ok {
		b, isBool := f.Bool(key("expert_weights_norm"))
		if !isBool {
			return p, fmt.Errorf("metadata key %s is not a boolean", key("expert_weights_norm"))
		}
		p.NormWeights = b
	}
	if v, ok := f.Float(key("expert_weights_scale")); ok && v != 0 {
		if !(v > 0) || v > 1e6 || float32(v) == 0 { // a value that rounds to 0 in float32 zeroes every expert
			return p, fmt.Errorf("%s = %g is out of range (0, 1e6] for a float32", key("expert_weights_scale"), v)
		}
		p.WeightsScale = float32(v)
	}
	return p, nil
}

// loadMoEFFN reads every layer's router and experts, and with shared the shared expert and its
// gate (all four of them in every layer, or none at all). normWeights is the architecture's
// default for expert_weights_norm.
func loadMoEFFN(f *gguf.File, m *Model, w *weights, shared, normWeights bool) error {
	p, err := readMoEParams(f, m.Hyper, normWeights)
	if err != nil {
		return err
	}
	m.Hyper.MoE = p
	h := m.Hyper
	for i := range m.Layers {
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		mo := &MoE{
			Router: w.matrix(blk("ffn_gate_inp.weight"), h.Dim, p.Experts),
			Gate:   w.experts(blk("ffn_gate_exps.weight"), h.Dim, p.FFN, p.Experts),
			Up:     w.experts(blk("ffn_up_exps.weight"), h.Dim, p.FFN, p.Experts),
			Down:   w.experts(blk("ffn_down_exps.weight"), p.FFN, h.Dim, p.Experts),
		}
		_, hasShared := f.Tensor(blk("ffn_up_shexp.weight"))
		switch {
		case hasShared && !shared:
			return fmt.Errorf("tensor %q: %s has no shared expert; the file does not match its architecture", blk("ffn_up_shexp.weight"), h.Arch)
		case hasShared && p.SharedFFN == 0:
			return fmt.Errorf("tensor %q is present but %s.expert_shared_feed_forward_length and %s.feed_forward_length are missing",
				blk("ffn_up_shexp.weight"), h.Arch, h.Arch)
		case hasShared:
			mo.Shared = &SharedExpert{
				Gate:   w.matrix(blk("ffn_gate_shexp.weight"), h.Dim, p.SharedFFN),
				Up:     w.matrix(blk("ffn_up_shexp.weight"), h.Dim, p.SharedFFN),
				Down:   w.matrix(blk("ffn_down_shexp.weight"), p.SharedFFN, h.Dim),
				Gating: w.rowVector(blk("ffn_gate_inp_shexp.weight"), h.Dim),
			}
		}
		if i > 0 && hasShared != (m.Layers[0].MoE.Shared != nil) {
			return fmt.Errorf("layer %d %s a shared expert (ffn_*_shexp) and layer 0 %s: every layer needs the same FFN",
				i, map[bool]string{true: "has", false: "lacks"}[hasShared], map[bool]string{true: "lacks it", false: "has one"}[hasShared])
		}
		m.Layers[i].MoE = mo
	}
	if w.err != nil {
		return w.err
	}
	if len(m.Layers) > 0 && m.Layers[0].MoE.Shared == nil {
		m.Hyper.MoE.SharedFFN = 0
	}
	return nil
}

// experts returns the 3-D tensor name of shape [cols, rows, count], one Matrix per expert.
func (w *weights) experts(name string, cols, rows, count int) Experts {
	if w.err != nil {
		return Experts{}
	}
	t, ok := w.f.Tensor(name)
	if !ok {
		w.err = fmt.Errorf("tensor %q is missing", name)
		return Experts{}
	}
	x, err := expertsOf(t, cols, rows, count)
	if err != nil {
		w.err = err
	}
	return x
}

func expertsOf(t *gguf.TensorInfo, cols, rows, count int) (Experts, error) {
	if len(t.Dims) != 3 || int(t.Dims[0]) != cols || int(t.Dims[1]) != rows || int(t.Dims[2]) != count {
		return Experts{}, fmt.Errorf("tensor %q has shape %v, want [%d %d %d] (columns, rows, experts)", t.Name, t.Dims, cols, rows, count)
	}
	rb, err := t.Type.RowBytes(cols)
	if err != nil {
		return Experts{}, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	per := rb * rows
	if t.Absent { // a header-only file (gguf.OpenHeader): shapes only
		x := Experts{Name: t.Name, Type: t.Type, Count: count, Rows: rows, Cols: cols, Info: t, Matrices: make([]Matrix, count)}
		for e := range x.Matrices {
			x.Matrices[e] = Matrix{Name: fmt.Sprintf("%s[expert %d]", t.Name, e), Type: t.Type, Rows: rows, Cols: cols, RowBytes: rb, Info: t}
		}
		return x, nil
	}
	if len(t.Data) < per*count {
		return Experts{}, fmt.Errorf("tensor %q holds %d bytes, want %d (%d experts of %d rows of %d %s elements)",
			t.Name, len(t.Data), per*count, count, rows, cols, t.Type)
	}
	x := Experts{Name: t.Name, Type: t.Type, Count: count, Rows: rows, Cols: cols, Info: t, Matrices: make([]Matrix, count)}
	for e := range x.Matrices {
		x.Matrices[e] = Matrix{
			Name: fmt.Sprintf("%s[expert %d]", t.Name, e), Type: t.Type, Rows: rows, Cols: cols, RowBytes: rb,
			Data: t.Data[e*per : (e+1)*per : (e+1)*per], Info: t,
		}
	}
	return x, nil
}

// rowVector returns a weight that multiplies the input to one value, stored as [n] or [n 1],
// as a one-row Matrix.
func (w *weights) rowVector(name string, n int) Matrix {
	if w.err != nil {
		return Matrix{}
	}
	t, ok := w.f.Tensor(name)
	if !ok {
		w.err = fmt.Errorf("tensor %q is missing", name)
		return Matrix{}
	}
	if len(t.Dims) == 1 && int(t.Dims[0]) == n {
		rb, err := t.Type.RowBytes(n)
		if err != nil {
			w.err = fmt.Errorf("tensor %q: %w", t.Name, err)
			return Matrix{}
		}
		if t.Absent { // a header-only file (gguf.OpenHeader): the shape only
			return Matrix{Name: t.Name, Type: t.Type, Rows: 1, Cols: n, RowBytes: rb, Info: t}
		}
		if len(t.Data) < rb {
			w.err = fmt.Errorf("tensor %q holds %d bytes, want %d", t.Name, len(t.Data), rb)
			return Matrix{}
		}
		return Matrix{Name: t.Name, Type: t.Type, Rows: 1, Cols: n, RowBytes: rb, Data: t.Data[:rb], Info: t}
	}
	m, err := matrixOf(t, n, 1)
	if err != nil {
		w.err = fmt.Errorf("%w (or [%d])", err, n)
	}
	return m
}

// Matrices lists every weight matrix of the layer that multiplies activations: the attention
// projections (a recurrent layer's Gated DeltaNet projections), then the dense FFN's or the router's, every expert's and the shared expert's.
func (l *Layer) Matrices() []Matrix {
	out := []Matrix{l.Q, l.K, l.V, l.O}
	if d := l.DeltaNet; d != nil {
		out = []Matrix{d.QKV, d.Z, d.Beta, d.Alpha, d.Out}
	}
	if l.MoE == nil {
		return append(out, l.Gate, l.Up, l.Down)
	}
	mo := l.MoE
	out = append(out, mo.Router)
	for _, x := range []Experts{mo.Gate, mo.Up, mo.Down} {
		out = append(out, x.Matrices...)
	}
	if s := mo.Shared; s != nil {
		out = append(out, s.Gate, s.Up, s.Down, s.Gating)
	}
	return out
}
