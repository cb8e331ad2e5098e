// Package synth writes random-weight GGUF models of a given architecture, shape and tensor
// type (`vkllm synth`), for benchmarks and for tests that compare the engine with llama.cpp
// on models nobody trained.
//
// The output is a pure function of the options: every tensor's values come from its own
// random stream (the seed and the tensor's index; an expert tensor has one stream per expert),
// so the file is the same byte for byte on every run and machine, however many threads
// quantize it.
package synth

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

// Shape is the architecture of a synthetic model. The expert fields apply to the
// mixture-of-experts architectures only, SharedFFN (the shared expert's width) to qwen2moe and
// qwen35moe, the SSM fields and RopeDims to the Gated DeltaNet hybrids (qwen35, qwen35moe).
type Shape struct {
	Dim, Layers, Heads, HeadsKV, FFN, Ctx int
	HeadDim                               int // 0: Dim/Heads
	Experts, ExpertsUsed, ExpertFFN       int
	SharedFFN                             int
	RopeDims                              int // rotated dimensions per head; 0: the head size
	// the Gated DeltaNet layers: every FullAttention-th layer is attention, the others
	// recurrent, with convolution taps, a head size, query/key heads and value heads
	FullAttention, SSMConv, SSMState, SSMKHeads, SSMVHeads int
	// Vocab is the number of tokens; 0: the vocabulary source's. A larger one pads the source's
	// vocabulary with unused tokens (a full-size model's embedding and head from a small vocabulary).
	Vocab int
}

// HeadSize is the per-head width of queries and keys.
func (s Shape) HeadSize() int {
	if s.HeadDim > 0 {
		return s.HeadDim
	}
	return s.Dim / s.Heads
}

// Architectures are the architectures Write knows, in the order the CLI lists them.
var Architectures = []string{"llama", "qwen2", "qwen3", "qwen2moe", "qwen3moe", "qwen35", "qwen35moe"}

// densePresets are well-known dense shapes: the parameter counts land near the names.
var densePresets = map[string]Shape{
	"tiny": {Dim: 256, Layers: 2, Heads: 4, HeadsKV: 2, FFN: 512, Ctx: 2048},
	"100m": {Dim: 768, Layers: 12, Heads: 12, HeadsKV: 12, FFN: 2048, Ctx: 4096},  // ~110M with a 32000 vocab
	"1b":   {Dim: 2048, Layers: 16, Heads: 32, HeadsKV: 8, FFN: 8192, Ctx: 8192},  // llama-3.2-1B shape
	"8b":   {Dim: 4096, Layers: 32, Heads: 32, HeadsKV: 8, FFN: 14336, Ctx: 8192}, // llama-3-8B shape
}

// moePresets are the qwen3moe shapes. tiny's dim is 256, not smaller, so that its attention,
// router-side and gate/up rows hold whole 256-element super-blocks and a K-quant or i-quant
// model is mostly that type; its expert width of 128 leaves the down projections to the
// fallback type, as llama-quantize does for such rows.
var moePresets = map[string]Shape{
	"tiny": {Dim: 256, Layers: 2, Heads: 4, HeadsKV: 2, FFN: 256, Ctx: 2048, Experts: 8, ExpertsUsed: 2, ExpertFFN: 128},
	// Qwen3-30B-A3B: 48 layers, 32 query heads of 128 over 4 KV heads, 128 experts of width
	// 768, 8 used per token (~30.5B parameters with its 151936 vocab, ~3.3B active)
	"30b-a3b": {Dim: 2048, Layers: 48, Heads: 32, HeadsKV: 4, HeadDim: 128, FFN: 6144, Ctx: 40960, Experts: 128, ExpertsUsed: 8, ExpertFFN: 768},
}

// qwen2moePresets are the qwen2moe shapes: tiny is qwen3moe's tiny with a shared expert of
// width 256 and qwen2's attention.
var qwen2moePresets = map[string]Shape{
	"tiny": {Dim: 256, Layers: 2, Heads: 4, HeadsKV: 2, FFN: 256, Ctx: 2048, Experts: 8, ExpertsUsed: 2, ExpertFFN: 128, SharedFFN: 256},
}

// qwen35Presets are the qwen35 shapes. tiny has one group of Qwen3.5's layer pattern (three
// Gated DeltaNet layers, then gated attention), value heads twice the key heads as in the
// published models (so the head mapping is tested), and a quarter of each attention head
// rotated; its rows hold whole 256-element super-blocks.
var qwen35Presets = map[string]Shape{
	"tiny": {Dim: 256, Layers: 4, Heads: 4, HeadsKV: 2, HeadDim: 64, RopeDims: 16, FFN: 512, Ctx: 2048,
		FullAttention: 4, SSMConv: 4, SSMState: 64, SSMKHeads: 2, SSMVHeads: 4},
}

// qwen35moePresets are the qwen35moe shapes: tiny is qwen35's tiny with qwen3moe's tiny
// experts and a shared expert of width 256.
var qwen35moePresets = map[string]Shape{
	"tiny": {Dim: 256, Layers: 4, Heads: 4, HeadsKV: 2, HeadDim: 64, RopeDims: 16, FFN: 256, Ctx: 2048,
		Experts: 8, ExpertsUsed: 2, ExpertFFN: 128, SharedFFN: 256,
		FullAttention: 4, SSMConv: 4, SSMState: 64, SSMKHeads: 2, SSMVHeads: 4},
	// Qwen3.6-35B-A3B as published: 40 layers of dim 2048 in 10 × (3 × (Gated DeltaNet → MoE)
	// → 1 × (gated attention → MoE)); DeltaNet 32 value heads and 16 query/key heads of 128,
	// conv kernel 4; gated attention 16 query heads over 2 KV heads of 256, 64 of them rotated;
	// 256 experts of width 512, 8 routed and 1 shared of 512; vocab 248320, context 262144
	// (~34.7B parameters, ~3B active). Written tiled (TiledPresets).
	"qwen36-35b-a3b": {Dim: 2048, Layers: 40, Heads: 16, HeadsKV: 2, HeadDim: 256, RopeDims: 64, FFN: 512, Ctx: 262144,
		Experts: 256, ExpertsUsed: 8, ExpertFFN: 512, SharedFFN: 512,
		FullAttention: 4, SSMConv: 4, SSMState: 128, SSMKHeads: 16, SSMVHeads: 32, Vocab: 248320},
}

// TiledPresets are the full-size presets the CLI writes tiled (Options.Tile) unless told
// otherwise: quantizing ~32B values of IQ2_XXS at ~1 M values a second a core would take hours.
var TiledPresets = map[string]bool{"qwen35moe/qwen36-35b-a3b": true}

func presetsOf(arch string) map[string]Shape {
	switch arch {
	case "qwen35":
		return qwen35Presets
	case "qwen35moe":
		return qwen35moePresets
	case "qwen3moe":
		return moePresets
	case "qwen2moe":
		return qwen2moePresets
	}
	return densePresets
}

// Presets lists the preset names for arch, sorted.
func Presets(arch string) []string {
	p := presetsOf(arch)
	var names []string
	for n := range p {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns the named shape for arch.
func Preset(arch, name string) (Shape, error) {
	s, ok := presetsOf(arch)[strings.ToLower(name)]
	if !ok {
		return Shape{}, fmt.Errorf("unknown preset %q for %s (want one of %s)", name, arch, strings.Join(Presets(arch), ", "))
	}
	return s, nil
}

// Types are the matrix types Write can produce, in the order the CLI lists them.
var Types = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1,
	quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K,
	quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4, quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S}

// ParseType returns the type of Types named name, in any case ("iq2_xxs").
func ParseType(name string) (quant.Type, error) {
	for _, t := range Types {
		if strings.EqualFold(t.String(), name) {
			return t, nil
		}
	}
	var names []string
	for _, t := range Types {
		names = append(names, strings.ToLower(t.String()))
	}
	return 0, fmt.Errorf("unknown tensor type %q (want one of %s)", name, strings.Join(names, ", "))
}

// Mix is the type of each role of tensor. A plain -type is one type for all (Uniform); a named
// mix (Mixes) chooses per role as a published quantization recipe does. Norms, biases, the router,
// the DeltaNet's convolution, decay and write-strength tensors stay F32 in every mix.
type Mix struct {
	Name        string
	Embed, Head quant.Type
	Attn        quant.Type // attention q, k, v and output (plain or gated)
	DeltaNet    quant.Type // a Gated DeltaNet layer's fused qkv and gate z projections
	SSMOut      quant.Type // a Gated DeltaNet layer's output projection
	FFN         quant.Type // a dense model's gate, up and down
	Experts     quant.Type // the routed experts' gate, up and down
	Shared      quant.Type // the shared expert's gate, up and down
}

// Uniform is typ for every matrix but the head of a K-quant model, which is Q6_K as
// llama-quantize's mixes keep it.
func Uniform(typ quant.Type) Mix {
	head := typ
	if typ == quant.Q2_K || typ == quant.Q3_K || typ == quant.Q4_K || typ == quant.Q5_K {
		head = quant.Q6_K
	}
	return Mix{Name: strings.ToLower(typ.String()), Embed: typ, Head: head, Attn: typ, DeltaNet: typ, SSMOut: typ, FFN: typ, Experts: typ, Shared: typ}
}

// Mixes are the named mixes, by -type name.
//
// ud-iq2_xxs follows unsloth's dynamic (UD) IQ2_XXS recipe for the Qwen3.5/3.6 MoE hybrids
// as unsloth published it (their Qwen3.5 GGUF benchmarks, 2026-02: ffn_up/gate_exps take low
// bits well, ffn_down_exps a little less; ssm_out "dramatically" worse when quantized and
// small; any attn_* especially sensitive in a hybrid; embeddings the least sensitive, the head
// safe at 6 bits). Only the routed experts, ~93% of the parameters, go down to IQ2_XXS; the
// rest stays high:
//
//	routed experts (gate, up, down)           IQ2_XXS  2.06 bits a weight
//	attention q/k/v/output, DeltaNet qkv and
//	gate z, ssm_out, the shared expert        Q8_0     8.5: sensitive and together only ~1.4B
//	token embedding                           Q5_K     5.5: the least sensitive
//	output head                               Q6_K     6.56: as llama-quantize keeps heads
//	norms, router, conv, decay, beta          F32
//
// On the qwen36-35b-a3b preset that is 10.67 GB (9.94 GiB), as unsloth's ~10.7 GB file.
// A dense model takes Q4_K for its FFN under this mix (it has no experts to push down).
var Mixes = map[string]Mix{
	"ud-iq2_xxs": {Name: "ud-iq2_xxs", Embed: quant.Q5_K, Head: quant.Q6_K, Attn: quant.Q8_0, DeltaNet: quant.Q8_0, SSMOut: quant.Q8_0,
		FFN: quant.Q4_K, Experts: quant.IQ2_XXS, Shared: quant.Q8_0},
}

// ParseMix returns the mix a -type names: a named mix (Mixes), or Uniform of one of Types.
func ParseMix(name string) (Mix, error) {
	if m, ok := Mixes[strings.ToLower(name)]; ok {
		return m, nil
	}
	t, err := ParseType(name)
	if err != nil {
		var mixes []string
		for n := range Mixes {
			mixes = append(mixes, n)
		}
		sort.Strings(mixes)
		return Mix{}, fmt.Errorf("%w, or a mix: %s", err, strings.Join(mixes, ", "))
	}
	return Uniform(t), nil
}

// Options say what to write.
type Options struct {
	Arch  string
	Shape Shape
	Type  quant.Type // every matrix's type (Uniform), unless Mix is set
	Mix   *Mix       // the type of each role; nil: Uniform(Type)
	Vocab *gguf.File // the tokenizer.* keys are copied from it
	Seed  uint64
	// Tile quantizes only the first TileValues values (whole rows) of each random stream and
	// repeats those blocks over the rest: a full-size i-quant model in seconds instead of hours
	// (the i-quants quantize at ~1 M values a second a core), for timing only, since its rows
	// repeat.
	Tile bool
	// HeaderOnly writes the metadata and the tensor infos, at the offsets the whole file would
	// give them, and no tensor data: what the plan reads, in an instant, at any size.
	HeaderOnly bool
}

// TileValues is how many values of each stream a tiled model quantizes (rounded up to whole
// rows).
const TileValues = 1 << 16

// Fallback is a tensor written in another type than asked because its rows do not hold whole
// blocks of the asked one.
type Fallback struct {
	Tensor   string
	Cols     int
	Want, As quant.Type
}

func (f Fallback) String() string {
	return fmt.Sprintf("%s: rows of %d are not a multiple of %s's block of %d, written as %s", f.Tensor, f.Cols, f.Want, f.Want.BlockSize(), f.As)
}

// Result describes a written model.
type Result struct {
	Params    int64
	Fallbacks []Fallback
	// Bytes is the whole file's size (for a header-only file, the size the whole file would
	// have: its header plus the tensor data it leaves out).
	Bytes int64
}

// FallbackType is the type llama-quantize writes a tensor of rows of cols in when want's blocks
// do not divide them: the grid i-quants and IQ4_XS fall back to IQ4_NL, Q2_K and Q3_K to Q4_0,
// Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, and when even that does not fit, F16.
func FallbackType(want quant.Type, cols int) quant.Type {
	if cols%want.BlockSize() == 0 {
		return want
	}
	var t quant.Type
	switch want {
	case quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_S, quant.IQ1_M, quant.IQ4_XS:
		t = quant.IQ4_NL
	case quant.Q2_K, quant.Q3_K:
		t = quant.Q4_0
	case quant.Q4_K:
		t = quant.Q5_0
	case quant.Q5_K:
		t = quant.Q5_1
	case quant.Q6_K:
		t = quant.Q8_0
	default:
		t = quant.F16
	}
	if cols%t.BlockSize() != 0 {
		return quant.F16
	}
	return t
}

type tensor struct {
	name    string
	typ     quant.Type
	dims    []uint64
	scale   float32
	bias    float32
	streams int // random streams: 1, or one per expert of a 3-D tensor
	data    []byte
}

// Write writes the model to path.
func Write(ctx context.Context, path string, o Options) (Result, error) {
	w, list, res, err := build(o)
	if err != nil {
		return Result{}, err
	}
	if o.HeaderOnly {
		for _, t := range list {
			if err := w.AddTensorShape(t.name, t.typ, t.dims); err != nil {
				return Result{}, fmt.Errorf("add %s: %w", t.name, err)
			}
		}
		if err := w.WriteHeaderFile(path); err != nil {
			return Result{}, fmt.Errorf("write header of %s: %w", path, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			return Result{}, fmt.Errorf("header of %s: %w", path, err)
		}
		res.Bytes = fi.Size() + dataBytes(list)
		return res, nil
	}
	if err := fill(ctx, list, o.Seed, o.Tile); err != nil {
		return Result{}, err
	}
	for _, t := range list {
		if err := w.AddTensor(t.name, t.typ, t.dims, t.data); err != nil {
			return Result{}, fmt.Errorf("add %s: %w", t.name, err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		return Result{}, fmt.Errorf("write %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Result{}, fmt.Errorf("written model %s: %w", path, err)
	}
	res.Bytes = fi.Size()
	return res, nil
}

// dataBytes is the tensor data section's size: each tensor's bytes padded to the writer's
// default alignment of 32 (synth sets no general.alignment).
func dataBytes(list []*tensor) int64 {
	var n int64
	for _, t := range list {
		elems := int64(1)
		for _, d := range t.dims {
			elems *= int64(d)
		}
		rb, _ := t.typ.RowBytes(int(t.dims[0])) // build checked every row against its type
		n += (int64(rb)*(elems/int64(t.dims[0])) + 31) / 32 * 32
	}
	return n
}

// build sets the metadata and lists the tensors, without their data.
func build(o Options) (*gguf.Writer, []*tensor, Result, error) {
	var res Result
	s, arch := o.Shape, o.Arch
	mix := Uniform(o.Type)
	if o.Mix != nil {
		mix = *o.Mix
	}
	known := false
	for _, a := range Architectures {
		known = known || a == arch
	}
	if !known {
		return nil, nil, res, fmt.Errorf("synth: unknown architecture %q (want one of %s)", arch, strings.Join(Architectures, ", "))
	}
	moe := arch == "qwen3moe" || arch == "qwen2moe" || arch == "qwen35moe"
	shared := arch == "qwen2moe" || arch == "qwen35moe"
	hybrid := arch == "qwen35" || arch == "qwen35moe"
	switch {
	case s.Dim <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.HeadsKV <= 0 || s.Heads%s.HeadsKV != 0 || s.HeadSize() <= 0:
		return nil, nil, res, fmt.Errorf("synth: shape %+v: dim, layers and heads must be positive, heads a multiple of KV heads", s)
	case s.HeadDim == 0 && s.Dim%s.Heads != 0:
		return nil, nil, res, fmt.Errorf("synth: dim %d is not a multiple of %d heads", s.Dim, s.Heads)
	case !moe && s.FFN <= 0:
		return nil, nil, res, fmt.Errorf("synth: shape %+v: a dense model needs a positive FFN width", s)
	case moe && (s.Experts <= 0 || s.ExpertsUsed <= 0 || s.ExpertsUsed > s.Experts || s.ExpertFFN <= 0):
		return nil, nil, res, fmt.Errorf("synth: shape %+v: a %s model needs experts, at most that many used, and a positive expert width", s, arch)
	case shared && s.SharedFFN <= 0:
		return nil, nil, res, fmt.Errorf("synth: shape %+v: a %s model needs a positive shared expert width", s, arch)
	case hybrid && (s.FullAttention <= 0 || s.SSMConv < 2 || s.SSMState <= 0 || s.SSMKHeads <= 0 || s.SSMVHeads%s.SSMKHeads != 0):
		return nil, nil, res, fmt.Errorf("synth: shape %+v: a %s model needs an attention interval, 2 or more convolution taps, a state size, and value heads a multiple of key heads", s, arch)
	case s.RopeDims < 0 || s.RopeDims%2 != 0 || s.RopeDims > s.HeadSize():
		return nil, nil, res, fmt.Errorf("synth: shape %+v: rotated dimensions must be even and at most the head size", s)
	}
	if o.Vocab == nil {
		return nil, nil, res, fmt.Errorf("synth: no vocabulary source")
	}
	tokens, ok := o.Vocab.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) == 0 {
		return nil, nil, res, fmt.Errorf("vocabulary source has no tokenizer.ggml.tokens")
	}
	nVocab := len(tokens)
	if s.Vocab > 0 && s.Vocab < nVocab {
		return nil, nil, res, fmt.Errorf("synth: the vocabulary source has %d tokens, more than the shape's %d", nVocab, s.Vocab)
	}
	pad := 0
	if s.Vocab > nVocab {
		pad, nVocab = s.Vocab-nVocab, s.Vocab
	}
	hd := s.HeadSize()
	w := gguf.NewWriter()
	w.SetString("general.architecture", arch)
	w.SetString("general.name", fmt.Sprintf("vkllm synthetic %s %s seed %d", arch, mix.Name, o.Seed))
	w.SetUint32(arch+".embedding_length", uint32(s.Dim))
	w.SetUint32(arch+".block_count", uint32(s.Layers))
	w.SetUint32(arch+".attention.head_count", uint32(s.Heads))
	w.SetUint32(arch+".attention.head_count_kv", uint32(s.HeadsKV))
	w.SetUint32(arch+".feed_forward_length", uint32(s.FFN))
	w.SetUint32(arch+".context_length", uint32(s.Ctx))
	if s.HeadDim > 0 {
		w.SetUint32(arch+".attention.key_length", uint32(hd))
		w.SetUint32(arch+".attention.value_length", uint32(hd))
	}
	ropeDims := hd
	if s.RopeDims > 0 {
		ropeDims = s.RopeDims
	}
	w.SetUint32(arch+".rope.dimension_count", uint32(ropeDims))
	w.SetFloat32(arch+".rope.freq_base", 10000)
	w.SetFloat32(arch+".attention.layer_norm_rms_epsilon", 1e-5)
	if moe {
		// as Qwen3-30B-A3B's converted GGUF: no gating or normalisation keys (llama.cpp's
		// qwen3moe always uses softmax and renormalises the selected weights)
		w.SetUint32(arch+".expert_count", uint32(s.Experts))
		w.SetUint32(arch+".expert_used_count", uint32(s.ExpertsUsed))
		w.SetUint32(arch+".expert_feed_forward_length", uint32(s.ExpertFFN))
		if shared {
			w.SetUint32(arch+".expert_shared_feed_forward_length", uint32(s.SharedFFN))
		}
	}
	keyDim, valueDim := s.SSMKHeads*s.SSMState, s.SSMVHeads*s.SSMState
	if hybrid {
		w.SetUint32(arch+".ssm.conv_kernel", uint32(s.SSMConv))
		w.SetUint32(arch+".ssm.state_size", uint32(s.SSMState))
		w.SetUint32(arch+".ssm.group_count", uint32(s.SSMKHeads))
		w.SetUint32(arch+".ssm.time_step_rank", uint32(s.SSMVHeads))
		w.SetUint32(arch+".ssm.inner_size", uint32(valueDim))
		w.SetUint32(arch+".full_attention_interval", uint32(s.FullAttention))
		// interleaved M-RoPE: the three position sections share the rotated pairs as Qwen3.5's
		// [11 11 10 0] share its 32; the fourth (held at 0 for text) is empty
		pairs := int32(ropeDims / 2)
		third := (pairs + 2) / 3
		w.SetInt32s(arch+".rope.dimension_sections", []int32{third, third, pairs - 2*third, 0})
	}
	for _, kv := range o.Vocab.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			w.SetValue(kv.Key, kv.Value)
		}
	}
	if pad > 0 {
		if err := padVocab(w, o.Vocab, tokens, pad); err != nil {
			return nil, nil, res, err
		}
	}
	inv := func(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
	var list []*tensor
	add := func(name string, t quant.Type, scale, bias float32, dims ...int) {
		ud := make([]uint64, len(dims))
		for i, d := range dims {
			ud[i] = uint64(d)
		}
		if len(dims) > 1 {
			if as := FallbackType(t, dims[0]); as != t {
				res.Fallbacks = append(res.Fallbacks, Fallback{Tensor: name, Cols: dims[0], Want: t, As: as})
				t = as
			}
		}
		streams := 1
		if len(dims) == 3 {
			streams = dims[2]
		}
		list = append(list, &tensor{name: name, typ: t, dims: ud, scale: scale, bias: bias, streams: streams})
	}
	add("token_embd.weight", mix.Embed, 1, 0, s.Dim, nVocab)
	for l := 0; l < s.Layers; l++ {
		b := func(n string) string { return fmt.Sprintf("blk.%d.%s", l, n) }
		add(b("attn_norm.weight"), quant.F32, 0.1, 1, s.Dim)
		switch {
		case hybrid && (l+1)%s.FullAttention != 0:
			addDeltaNet(add, b, mix, s.Dim, keyDim, valueDim, s)
		case hybrid:
			// gated attention: each head's query, then its output gate
			add(b("attn_q.weight"), mix.Attn, inv(s.Dim), 0, s.Dim, 2*s.Heads*hd)
			add(b("attn_k.weight"), mix.Attn, inv(s.Dim), 0, s.Dim, s.HeadsKV*hd)
			add(b("attn_v.weight"), mix.Attn, inv(s.Dim), 0, s.Dim, s.HeadsKV*hd)
			add(b("attn_output.weight"), mix.Attn, inv(s.Heads*hd), 0, s.Heads*hd, s.Dim)
			add(b("attn_q_norm.weight"), quant.F32, 0.1, 1, hd)
			add(b("attn_k_norm.weight"), quant.F32, 0.1, 1, hd)
		default:
			add(b("attn_q.weight"), mix.Attn, inv(s.Dim), 0, s.Dim, s.Heads*hd)
			add(b("attn_k.weight"), mix.Attn, inv(s.Dim), 0, s.Dim, s.HeadsKV*hd)
			add(b("attn_v.weight"), mix.Attn, inv(s.Dim), 0, s.Dim, s.HeadsKV*hd)
			add(b("attn_output.weight"), mix.Attn, inv(s.Heads*hd), 0, s.Heads*hd, s.Dim)
		}
		if hybrid {
			add(b("post_attention_norm.weight"), quant.F32, 0.1, 1, s.Dim)
		} else {
			add(b("ffn_norm.weight"), quant.F32, 0.1, 1, s.Dim)
		}
		if moe {
			// the router's scale spreads its logits over a few units, so that the top
			// experts are clear winners but the runners-up still carry weight
			add(b("ffn_gate_inp.weight"), quant.F32, 2*inv(s.Dim), 0, s.Dim, s.Experts)
			add(b("ffn_gate_exps.weight"), mix.Experts, inv(s.Dim), 0, s.Dim, s.ExpertFFN, s.Experts)
			add(b("ffn_up_exps.weight"), mix.Experts, inv(s.Dim), 0, s.Dim, s.ExpertFFN, s.Experts)
			add(b("ffn_down_exps.weight"), mix.Experts, inv(s.ExpertFFN), 0, s.ExpertFFN, s.Dim, s.Experts)
			if shared {
				add(b("ffn_gate_inp_shexp.weight"), quant.F32, 2*inv(s.Dim), 0, s.Dim)
				add(b("ffn_gate_shexp.weight"), mix.Shared, inv(s.Dim), 0, s.Dim, s.SharedFFN)
				add(b("ffn_up_shexp.weight"), mix.Shared, inv(s.Dim), 0, s.Dim, s.SharedFFN)
				add(b("ffn_down_shexp.weight"), mix.Shared, inv(s.SharedFFN), 0, s.SharedFFN, s.Dim)
			}
		} else {
			add(b("ffn_gate.weight"), mix.FFN, inv(s.Dim), 0, s.Dim, s.FFN)
			add(b("ffn_up.weight"), mix.FFN, inv(s.Dim), 0, s.Dim, s.FFN)
			add(b("ffn_down.weight"), mix.FFN, inv(s.FFN), 0, s.FFN, s.Dim)
		}
		switch arch {
		case "qwen2", "qwen2moe":
			add(b("attn_q.bias"), quant.F32, 0.2, 0, s.Heads*hd)
			add(b("attn_k.bias"), quant.F32, 0.2, 0, s.HeadsKV*hd)
			add(b("attn_v.bias"), quant.F32, 0.2, 0, s.HeadsKV*hd)
		case "qwen3", "qwen3moe":
			add(b("attn_q_norm.weight"), quant.F32, 0.1, 1, hd)
			add(b("attn_k_norm.weight"), quant.F32, 0.1, 1, hd)
		}
	}
	add("output_norm.weight", quant.F32, 0.1, 1, s.Dim)
	add("output.weight", mix.Head, 4*inv(s.Dim), 0, s.Dim, nVocab)
	for _, t := range list {
		n := int64(1)
		for _, d := range t.dims {
			n *= int64(d)
		}
		res.Params += n
	}
	return w, list, res, nil
}

// addDeltaNet lists a Gated DeltaNet layer's tensors under llama.cpp's names: the fused q/k/v
// projection and the gate z in the mix's DeltaNet type, the output projection in its SSMOut
// type; the convolution, the decay's and write strength's projections and constants, and the
// output norm in F32 (as the converter leaves them). ssm_a holds -exp(A_log), so its values are
// negative: decays between e^-3 and e^-0.05 a token.
func addDeltaNet(add func(string, quant.Type, float32, float32, ...int), b func(string) string, mix Mix, dim, keyDim, valueDim int, s Shape) {
	inv := func(n int) float32 { return float32(1 / math.Sqrt(float64(n))) }
	convDim := 2*keyDim + valueDim
	add(b("attn_qkv.weight"), mix.DeltaNet, inv(dim), 0, dim, convDim)
	add(b("attn_gate.weight"), mix.DeltaNet, inv(dim), 0, dim, valueDim)
	add(b("ssm_conv1d.weight"), quant.F32, 0.5, 0, s.SSMConv, convDim)
	add(b("ssm_dt.bias"), quant.F32, 0.5, 0, s.SSMVHeads)
	add(b("ssm_a"), quant.F32, 0.3, -1, s.SSMVHeads)
	add(b("ssm_beta.weight"), quant.F32, inv(dim), 0, dim, s.SSMVHeads)
	add(b("ssm_alpha.weight"), quant.F32, inv(dim), 0, dim, s.SSMVHeads)
	add(b("ssm_norm.weight"), quant.F32, 0.1, 1, s.SSMState)
	add(b("ssm_out.weight"), mix.SSMOut, inv(valueDim), 0, valueDim, dim)
}

// padVocab appends pad unused tokens ("<|synth_unused_N|>", token type 5, the lowest score) to
// the copied vocabulary, so that a small source vocabulary can stand for a full-size one.
func padVocab(w *gguf.Writer, src *gguf.File, tokens []string, pad int) error {
	all := append(append(make([]string, 0, len(tokens)+pad), tokens...), make([]string, pad)...)
	for i := range pad {
		all[len(tokens)+i] = fmt.Sprintf("<|synth_unused_%d|>", i)
	}
	w.SetStrings("tokenizer.ggml.tokens", all)
	if _, present := src.Get("tokenizer.ggml.scores"); present {
		scores, ok := src.Float32s("tokenizer.ggml.scores")
		if !ok || len(scores) != len(tokens) {
			return fmt.Errorf("synth: pad the vocabulary: tokenizer.ggml.scores has %d entries for %d tokens", len(scores), len(tokens))
		}
		low := float32(0)
		for _, v := range scores {
			low = min(low, v)
		}
		padded := append(append(make([]float32, 0, len(all)), scores...), make([]float32, pad)...)
		for i := len(scores); i < len(padded); i++ {
			padded[i] = low - 1
		}
		w.SetFloat32s("tokenizer.ggml.scores", padded)
	}
	if _, present := src.Get("tokenizer.ggml.token_type"); present {
		types, ok := src.Int32s("tokenizer.ggml.token_type")
		if !ok || len(types) != len(tokens) {
			return fmt.Errorf("synth: pad the vocabulary: tokenizer.ggml.token_type has %d entries for %d tokens", len(types), len(tokens))
		}
		padded := append(append(make([]int32, 0, len(all)), types...), make([]int32, pad)...)
		for i := len(types); i < len(padded); i++ {
			padded[i] = 5 // unused
		}
		w.SetInt32s("tokenizer.ggml.token_type", padded)
	}
	return nil
}

// job is one random stream of one tensor: the whole tensor, or one expert of a 3-D one.
type job struct{ tensor, stream int }

// fill draws and quantizes every tensor's values in parallel. Stream k of tensor i draws
// uniform values on [-sqrt(3), sqrt(3)] (unit variance) times the tensor's scale plus its bias
// from PCG(seed, i) for a single-stream tensor and PCG(seed, i | (k+1)<<32) for expert k.
// With tile, a stream draws and quantizes only its first TileValues values (whole rows) and
// repeats their blocks.
func fill(ctx context.Context, list []*tensor, seed uint64, tile bool) error {
	var jobs []job
	for i, t := range list {
		n := 1
		for _, d := range t.dims {
			n *= int(d)
		}
		rb, err := t.typ.RowBytes(int(t.dims[0]))
		if err != nil {
			return fmt.Errorf("tensor %s as %s: %w", t.name, t.typ, err)
		}
		t.data = make([]byte, rb*(n/int(t.dims[0])))
		for k := 0; k < t.streams; k++ {
			jobs = append(jobs, job{i, k})
		}
	}
	var (
		wg       sync.WaitGroup
		firstErr error
		errMu    sync.Mutex
		next     = make(chan job)
	)
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				t := list[j.tensor]
				per := len(t.data) / t.streams
				n := 1
				for _, d := range t.dims {
					n *= int(d)
				}
				n /= t.streams
				stream := uint64(j.tensor)
				if t.streams > 1 {
					stream |= uint64(j.stream+1) << 32
				}
				rng := rand.New(rand.NewPCG(seed, stream))
				drawn := n
				if cols := int(t.dims[0]); tile && n > TileValues {
					drawn = min(n, (TileValues+cols-1)/cols*cols)
				}
				vals := make([]float32, drawn)
				for k := range vals {
					vals[k] = float32((rng.Float64()*2-1)*1.7320508)*t.scale + t.bias
				}
				data, err := quant.Quantize(t.typ, vals)
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("quantize %s to %s: %w", t.name, t.typ, err)
					}
					errMu.Unlock()
					continue
				}
				dst := t.data[j.stream*per : (j.stream+1)*per]
				for off := 0; off < len(dst); off += len(data) { // whole rows: both are multiples of the row's bytes
					copy(dst[off:], data)
				}
			}
		}()
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- j
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("synth cancelled: %w", err)
	}
	return firstErr
}
