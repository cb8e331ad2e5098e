// Package model reads an LLM's hyperparameters and weights out of a GGUF file, per architecture,
// and defines the Runner interface every forward implementation (CPU reference, Vulkan) satisfies.
//
// Weights stay in the file's mapping in their quantized layout; this package only locates and
// checks them. Small vectors (norm weights, biases) are dequantized to float32 at load.
package model

import (
	"fmt"
	"math"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

// Runner evaluates a model: it runs tokens at positions pos, pos+1, ... against a KV cache that
// persists across calls until Reset. A Runner is used by one goroutine at a time.
type Runner interface {
	// Eval returns the logits of the last token (VocabSize values), or of every token
	// (len(tokens)*VocabSize values, token-major) when wantAllLogits. The returned slice belongs
	// to the caller. pos may be below the number of cached positions (the engine rewinds to reuse
	// a shared prompt prefix): the cache then drops every position from pos on. pos beyond the
	// cached positions, or past the context, is an error.
	Eval(tokens []int, pos int, wantAllLogits bool) ([]float32, error)
	Reset()
	Close() error
	Name() string
}

// RopeKind says which dimensions RoPE rotates together.
type RopeKind int

const (
	// RopeNormal rotates adjacent pairs (2i, 2i+1). llama-architecture GGUFs store Q and K
	// permuted so that this is equivalent to the NEOX rotation of the original checkpoint.
	RopeNormal RopeKind = iota
	// RopeNeoX rotates pairs (i, i+dims/2) (qwen2, qwen3).
	RopeNeoX
)

func (k RopeKind) String() string {
	if k == RopeNeoX {
		return "neox"
	}
	return "normal"
}

// Rope is the rotary position embedding of a model: theta_i(pos) = pos * FreqScale *
// FreqBase^(-2i/Dims) / Factors[i].
type Rope struct {
	Kind      RopeKind
	Dims      int       // rotated dimensions per head (rope.dimension_count; default the head size)
	FreqBase  float32   // rope.freq_base (default 10000)
	FreqScale float32   // 1/rope.scaling.factor for linear scaling; 1 otherwise
	Scaling   string    // rope.scaling.type: "none", "linear" (yarn is refused at load)
	Factors   []float32 // rope_freqs.weight (llama 3.1 frequency factors), nil when absent
	// Sections is rope.dimension_sections, the interleaved M-RoPE of qwen35 (zero elsewhere):
	// pair i belongs to section i%3 while i < 3*Sections[i%3], to the fourth otherwise. A text
	// token's position is the same in the first three sections and 0 in the fourth, so the
	// fourth's pairs are never rotated.
	Sections [4]int
}

// StillPair reports whether rope pair i keeps position 0 for text tokens (Sections' fourth
// section).
func (r Rope) StillPair(i int) bool {
	s := r.Sections
	total := s[0] + s[1] + s[2] + s[3]
	if total == 0 {
		return false
	}
	j := i % total
	return j >= 3*s[j%3]
}

// Hyperparameters are the shape and constants of a model, from {arch}.* metadata.
type Hyperparameters struct {
	Arch          string  // general.architecture
	Dim           int     // embedding_length
	Layers        int     // block_count
	Heads         int     // attention.head_count
	HeadsKV       int     // attention.head_count_kv (default Heads)
	HeadDim       int     // attention.key_length (default Dim/Heads)
	ValueDim      int     // attention.value_length (default HeadDim)
	FFN           int     // feed_forward_length
	ContextLength int     // context_length (training context)
	VocabSize     int     // rows of token_embd.weight
	NormEps       float32 // attention.layer_norm_rms_epsilon
	Rope          Rope
	MoE           MoEParams // the mixture-of-experts FFN's routing (zero for dense models)
	SSM           SSMParams // the Gated DeltaNet layers' shape (zero without recurrent layers)
	Recurrent     []bool    // per layer: a Gated DeltaNet block instead of attention (nil: none)
}

// IsRecurrent reports whether layer l is a recurrent (Gated DeltaNet) block.
func (h Hyperparameters) IsRecurrent(l int) bool { return l < len(h.Recurrent) && h.Recurrent[l] }

// QDim is the width of the query projection, Heads*HeadDim.
func (h Hyperparameters) QDim() int { return h.Heads * h.HeadDim }

// KDim is the width of one position's keys, HeadsKV*HeadDim.
func (h Hyperparameters) KDim() int { return h.HeadsKV * h.HeadDim }

// VDim is the width of one position's values, HeadsKV*ValueDim.
func (h Hyperparameters) VDim() int { return h.HeadsKV * h.ValueDim }

// Matrix is a weight matrix in the file's own layout: Rows rows of Cols elements, each row
// RowBytes bytes of Type blocks, row-major in Data (a view into the file mapping).
type Matrix struct {
	Name     string
	Type     quant.Type
	Rows     int
	Cols     int
	RowBytes int
	Data     []byte
	Info     *gguf.TensorInfo
}

// Row returns the bytes of row i.
func (m Matrix) Row(i int) []byte { return m.Data[i*m.RowBytes : (i+1)*m.RowBytes] }

// Vector is a one-dimensional weight (norm weight, bias) dequantized to float32.
type Vector struct {
	Name   string
	Values []float32
	Info   *gguf.TensorInfo
}

// Present reports whether the model has this vector (optional biases and norms).
func (v Vector) Present() bool { return v.Values != nil }

// Layer holds one transformer block's weights. Optional ones (biases, Q/K norms) are zero when
// the architecture has none.
type Layer struct {
	AttnNorm            Vector // blk.N.attn_norm.weight
	Q, K, V, O          Matrix // blk.N.attn_q/k/v/output.weight
	QBias, KBias, VBias Vector // qwen2: blk.N.attn_q/k/v.bias
	QNorm, KNorm        Vector // qwen3, qwen35: blk.N.attn_q_norm/attn_k_norm.weight, per head
	FFNNorm             Vector // blk.N.ffn_norm.weight
	Gate, Up, Down      Matrix // blk.N.ffn_gate/up/down.weight (dense FFN)
	MoE                 *MoE   // the mixture-of-experts FFN in place of Gate, Up, Down; nil when dense
	// DeltaNet is a recurrent layer's block in place of the attention (Q, K, V, O and their
	// norms are then empty); nil in an attention layer. In qwen35's attention layers Q has
	// 2*QDim rows: each head's query followed by its output gate.
	DeltaNet *DeltaNet
}

// Model is a loaded model: hyperparameters and weight views into the GGUF mapping.
type Model struct {
	Hyper      Hyperparameters
	TokenEmbd  Matrix // token_embd.weight: VocabSize rows of Dim
	Layers     []Layer
	OutputNorm Vector // output_norm.weight
	Output     Matrix // output.weight, or token_embd.weight when tied
	Tied       bool   // the output head reuses the token embedding
	File       *gguf.File
}

// Load reads the hyperparameters and locates every weight of the architecture named by
// general.architecture. Unsupported architectures and missing or misshapen tensors are errors
// naming the file and the tensor.
func Load(f *gguf.File) (*Model, error) {
	arch, ok := f.String("general.architecture")
	if !ok {
		return nil, fmt.Errorf("model %s: no general.architecture in the metadata", f.Path)
	}
	var (
		m   *Model
		err error
	)
	switch arch {
	case "llama":
		m, err = loadLlama(f)
	case "qwen2":
		m, err = loadQwen2(f)
	case "qwen3":
		m, err = loadQwen3(f)
	case "qwen2moe":
		m, err = loadQwen2MoE(f)
	case "qwen3moe":
		m, err = loadQwen3MoE(f)
	case "qwen35":
		m, err = loadQwen35(f)
	case "qwen35moe":
		m, err = loadQwen35MoE(f)
	default:
		return nil, fmt.Errorf("model %s: architecture %q is not supported (supported: llama, qwen2, qwen3, qwen2moe, qwen3moe, qwen35, qwen35moe)", f.Path, arch)
	}
	if err != nil {
		return nil, fmt.Errorf("model %s (%s): %w", f.Path, arch, err)
	}
	m.File = f
	return m, nil
}

// Params returns the total number of weight elements.
func (m *Model) Params() int64 {
	var n int64
	for _, t := range m.File.Tensors {
		n += t.Elements()
	}
	return n
}

// tensorsPerLayer is the fewest tensors a layer of any supported architecture has.
const tensorsPerLayer = 6

// readHyper reads the {arch}.* keys shared by every supported architecture.
func readHyper(f *gguf.File, arch string) (Hyperparameters, error) {
	h := Hyperparameters{Arch: arch}
	key := func(k string) string { return arch + "." + k }
	var err error
	required := func(k string, dst *int) {
		if err != nil {
			return
		}
		v, ok := f.Uint(key(k))
		if !ok {
			err = fmt.Errorf("metadata key %s is missing or not an unsigned integer", key(k))
			return
		}
		if v == 0 || v > 1<<24 {
			err = fmt.Errorf("metadata key %s = %d is out of range (1..%d)", key(k), v, 1<<24)
			return
		}
		*dst = int(v)
	}
	optional := func(k string, dst *int, def int) {
		if err != nil {
			return
		}
		*dst = def
		if _, present := f.Get(key(k)); present {
			required(k, dst)
		}
	}
	required("embedding_length", &h.Dim)
	required("block_count", &h.Layers)
	required("attention.head_count", &h.Heads)
	optional("feed_forward_length", &h.FFN, 0) // required by the dense FFN (loadDenseFFN)
	optional("attention.head_count_kv", &h.HeadsKV, h.Heads)
	optional("context_length", &h.ContextLength, 2048)
	if err != nil {
		return h, err
	}
	// Every layer has at least its norms and attention projections (attn_norm, attn_q, attn_k,
	// attn_v, attn_output, ffn_norm): a block_count the file has no tensors for is refused before
	// anything is sized by it (1<<24 layers would be 15 GB of bookkeeping).
	if need := h.Layers * tensorsPerLayer; need > len(f.Tensors) {
		return h, fmt.Errorf("%s = %d needs at least %d tensors (%d per layer) but the file has %d: the metadata does not describe this file",
			key("block_count"), h.Layers, need, tensorsPerLayer, len(f.Tensors))
	}
	if h.Dim%h.Heads != 0 {
		if _, ok := f.Get(key("attention.key_length")); !ok {
			return h, fmt.Errorf("embedding_length %d is not a multiple of head_count %d and attention.key_length is missing", h.Dim, h.Heads)
		}
	}
	optional("attention.key_length", &h.HeadDim, h.Dim/h.Heads)
	optional("attention.value_length", &h.ValueDim, h.HeadDim)
	optional("rope.dimension_count", &h.Rope.Dims, h.HeadDim)
	if err != nil {
		return h, err
	}
	if h.Heads%h.HeadsKV != 0 {
		return h, fmt.Errorf("attention.head_count %d is not a multiple of head_count_kv %d", h.Heads, h.HeadsKV)
	}
	if h.Rope.Dims > h.HeadDim || h.Rope.Dims%2 != 0 {
		return h, fmt.Errorf("rope.dimension_count %d must be even and at most the head size %d", h.Rope.Dims, h.HeadDim)
	}
	h.NormEps = 1e-5
	if v, ok := f.Float(key("attention.layer_norm_rms_epsilon")); ok {
		if !(v > 0 && v < 1) || float32(v) == 0 { // a value that rounds to 0 in float32 divides by 0
			return h, fmt.Errorf("%s = %g is out of range (0, 1) for a float32", key("attention.layer_norm_rms_epsilon"), v)
		}
		h.NormEps = float32(v)
	}
	h.Rope.FreqBase = 10000
	if v, ok := f.Float(key("rope.freq_base")); ok {
		if b := float32(v); !(b > 0) || math.IsInf(float64(b), 0) {
			return h, fmt.Errorf("%s = %g must be positive and within float32's range", key("rope.freq_base"), v)
		}
		h.Rope.FreqBase = float32(v)
	}
	h.Rope.FreqScale = 1
	h.Rope.Scaling = "none"
	factor := 0.0
	if v, ok := f.Float(key("rope.scaling.factor")); ok {
		factor = v
	} else if v, ok := f.Float(key("rope.scale_linear")); ok { // older files
		factor = v
		h.Rope.Scaling = "linear"
	}
	if s, ok := f.String(key("rope.scaling.type")); ok {
		h.Rope.Scaling = s
	} else if factor != 0 && factor != 1 {
		h.Rope.Scaling = "linear"
	}
	switch h.Rope.Scaling {
	case "none", "":
		h.Rope.Scaling = "none"
	case "linear":
		if factor != 0 && factor != 1 {
			scale := float32(1 / factor)
			if !(factor > 0) || scale == 0 || math.IsInf(float64(scale), 0) {
				return h, fmt.Errorf("%s = %g must be positive, with a reciprocal within float32's range", key("rope.scaling.factor"), factor)
			}
			h.Rope.FreqScale = scale
		}
	default:
		return h, fmt.Errorf("rope scaling %q is not supported yet (supported: none, linear)", h.Rope.Scaling)
	}
	return h, nil
}

// weights looks tensors up by name and checks their shapes.
type weights struct {
	f   *gguf.File
	err error
}

// matrix returns the 2-D tensor name with cols elements per row and rows rows (rows < 0: any).
func (w *weights) matrix(name string, cols, rows int) Matrix {
	if w.err != nil {
		return Matrix{}
	}
	t, ok := w.f.Tensor(name)
	if !ok {
		w.err = fmt.Errorf("tensor %q is missing", name)
		return Matrix{}
	}
	m, err := matrixOf(t, cols, rows)
	if err != nil {
		w.err = err
	}
	return m
}

func matrixOf(t *gguf.TensorInfo, cols, rows int) (Matrix, error) {
	if len(t.Dims) != 2 || int(t.Dims[0]) != cols || (rows >= 0 && int(t.Dims[1]) != rows) {
		want := fmt.Sprintf("[%d %d]", cols, rows)
		if rows < 0 {
			want = fmt.Sprintf("[%d N]", cols)
		}
		return Matrix{}, fmt.Errorf("tensor %q has shape %v, want %s", t.Name, t.Dims, want)
	}
	rb, err := t.Type.RowBytes(cols)
	if err != nil {
		return Matrix{}, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	n := int(t.Dims[1])
	if t.Absent { // a header-only file (gguf.OpenHeader): the shape is checked, there is no data
		return Matrix{Name: t.Name, Type: t.Type, Rows: n, Cols: cols, RowBytes: rb, Info: t}, nil
	}
	if len(t.Data) < rb*n {
		return Matrix{}, fmt.Errorf("tensor %q holds %d bytes, want %d (%d rows of %d %s elements)", t.Name, len(t.Data), rb*n, n, cols, t.Type)
	}
	return Matrix{Name: t.Name, Type: t.Type, Rows: n, Cols: cols, RowBytes: rb, Data: t.Data[:rb*n], Info: t}, nil
}

// vector returns the 1-D tensor name of n elements, dequantized.
func (w *weights) vector(name string, n int) Vector {
	if w.err != nil {
		return Vector{}
	}
	t, ok := w.f.Tensor(name)
	if !ok {
		w.err = fmt.Errorf("tensor %q is missing", name)
		return Vector{}
	}
	v, err := vectorOf(t, n)
	if err != nil {
		w.err = err
	}
	return v
}

// optionalVector is vector for tensors an architecture may omit.
func (w *weights) optionalVector(name string, n int) Vector {
	if w.err != nil {
		return Vector{}
	}
	if _, ok := w.f.Tensor(name); !ok {
		return Vector{}
	}
	return w.vector(name, n)
}

func vectorOf(t *gguf.TensorInfo, n int) (Vector, error) {
	if len(t.Dims) != 1 || int(t.Dims[0]) != n {
		return Vector{}, fmt.Errorf("tensor %q has shape %v, want [%d]", t.Name, t.Dims, n)
	}
	vals := make([]float32, n)
	if t.Absent { // a header-only file (gguf.OpenHeader): zeros stand for the values it lacks
		return Vector{Name: t.Name, Values: vals, Info: t}, nil
	}
	if err := quant.Dequantize(t.Type, t.Data, vals); err != nil {
		return Vector{}, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return Vector{Name: t.Name, Values: vals, Info: t}, nil
}

// loadCommon reads what llama, qwen2 and qwen3 share: loadBase's attention and a dense SwiGLU
// FFN in every layer.
func loadCommon(f *gguf.File, arch string, kind RopeKind) (*Model, *weights, error) {
	m, w, err := loadBase(f, arch, kind)
	if err != nil {
		return nil, nil, err
	}
	if err := loadDenseFFN(f, m, w); err != nil {
		return nil, nil, err
	}
	return m, w, nil
}

// loadDenseFFN reads every layer's ffn_gate, ffn_up and ffn_down (feed_forward_length wide). A
// file that declares experts is refused: its architecture's loader must read them.
func loadDenseFFN(f *gguf.File, m *Model, w *weights) error {
	h := m.Hyper
	key := func(k string) string { return h.Arch + "." + k }
	if n, ok := f.Uint(key("expert_count")); ok && n > 0 {
		return fmt.Errorf("%s = %d: mixture-of-experts layers are supported for qwen2moe and qwen3moe only, not for %s", key("expert_count"), n, h.Arch)
	}
	if h.FFN == 0 {
		return fmt.Errorf("metadata key %s is missing or not an unsigned integer", key("feed_forward_length"))
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		l.Gate = w.matrix(blk("ffn_gate.weight"), h.Dim, h.FFN)
		l.Up = w.matrix(blk("ffn_up.weight"), h.Dim, h.FFN)
		l.Down = w.matrix(blk("ffn_down.weight"), h.FFN, h.Dim)
	}
	return w.err
}

// loadBase reads what every supported architecture shares: hyperparameters, embedding, the
// attention matrices and norms of every layer, the FFN's pre-norm, the output norm and head.
// The FFN's own weights are the caller's (loadDenseFFN, loadMoEFFN).
func loadBase(f *gguf.File, arch string, kind RopeKind) (*Model, *weights, error) {
	h, err := readHyper(f, arch)
	if err != nil {
		return nil, nil, err
	}
	h.Rope.Kind = kind
	m, w, err := loadEnds(f, &h)
	if err != nil {
		return nil, nil, err
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		l.AttnNorm = w.vector(blk("attn_norm.weight"), h.Dim)
		l.Q = w.matrix(blk("attn_q.weight"), h.Dim, h.QDim())
		l.K = w.matrix(blk("attn_k.weight"), h.Dim, h.KDim())
		l.V = w.matrix(blk("attn_v.weight"), h.Dim, h.VDim())
		l.O = w.matrix(blk("attn_output.weight"), h.Heads*h.ValueDim, h.Dim)
		l.FFNNorm = w.vector(blk("ffn_norm.weight"), h.Dim)
	}
	if w.err != nil {
		return nil, nil, w.err
	}
	m.Hyper = h
	return m, w, nil
}

// loadEnds reads what sits outside the blocks: the token embedding (which sets h.VocabSize),
// the output norm and head, and llama 3.1's rope factors. It returns the model with h.Layers
// empty layers for the architecture's loader to fill.
func loadEnds(f *gguf.File, h *Hyperparameters) (*Model, *weights, error) {
	w := &weights{f: f}
	m := &Model{}
	m.TokenEmbd = w.matrix("token_embd.weight", h.Dim, -1)
	if w.err != nil {
		return nil, nil, w.err
	}
	h.VocabSize = m.TokenEmbd.Rows
	m.Layers = make([]Layer, h.Layers)
	m.OutputNorm = w.vector("output_norm.weight", h.Dim)
	if _, ok := f.Tensor("output.weight"); ok {
		m.Output = w.matrix("output.weight", h.Dim, h.VocabSize)
	} else {
		m.Output, m.Tied = m.TokenEmbd, true
	}
	if t, ok := f.Tensor("rope_freqs.weight"); ok && w.err == nil {
		v, err := vectorOf(t, h.Rope.Dims/2)
		if err != nil {
			return nil, nil, err
		}
		h.Rope.Factors = v.Values
	}
	if w.err != nil {
		return nil, nil, w.err
	}
	return m, w, nil
}
