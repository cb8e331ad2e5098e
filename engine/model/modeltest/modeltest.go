// Package modeltest writes small random-weight GGUF models of every supported architecture and
// tensor type, for the tests of the forward passes (CPU, Vulkan) and the engine.
//
// The weight values depend only on the seed and the tensor's name, never on the tensor type, so
// two specs that differ only in Type describe the same model at two precisions.
package modeltest

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

// Spec is the shape and type of a random model.
type Spec struct {
	Arch    string     // llama, qwen2 or qwen3
	Type    quant.Type // type of the matrices and the token embedding; norms and biases stay F32
	Dim     int
	Layers  int
	Heads   int
	HeadsKV int
	FFN     int
	Vocab   int // at least 259 when WithVocab (3 specials and 256 byte tokens)
	Context int
	Seed    uint64
	Tied    bool // no output.weight: the head reuses token_embd.weight
	// RopeFactors adds llama 3.1's rope_freqs.weight (one positive factor per rotated pair).
	RopeFactors bool

	// WithVocab writes a small SentencePiece vocabulary (specials, byte tokens, then words) so
	// the file can be loaded by the engine, and ChatTemplate (if set) as tokenizer.chat_template.
	WithVocab    bool
	ChatTemplate string
}

// Small returns a tiny spec whose rows are a multiple of 256 (so every K-quant type applies).
func Small(arch string, t quant.Type, seed uint64) Spec {
	return Spec{Arch: arch, Type: t, Dim: 256, Layers: 2, Heads: 4, HeadsKV: 2, FFN: 256, Vocab: 320, Context: 256, Seed: seed, WithVocab: true}
}

// Words are the non-byte tokens of the test vocabulary, in id order after the byte tokens.
var Words = []string{"▁Once", "▁upon", "▁a", "▁time", "▁there", "▁was", "▁little", "▁girl", "▁the", "▁dog", "▁and", "▁cat", "▁.", "Hello", "▁Hello", "▁world"}

// Bytes returns the GGUF file of s.
func Bytes(s Spec) ([]byte, error) {
	w, err := build(s)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("write random %s %s model: %w", s.Arch, s.Type, err)
	}
	return buf.Bytes(), nil
}

// WriteFile writes the GGUF file of s to path.
func WriteFile(path string, s Spec) error {
	w, err := build(s)
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

func build(s Spec) (*gguf.Writer, error) {
	switch s.Arch {
	case "llama", "qwen2", "qwen3":
	default:
		return nil, fmt.Errorf("random model: architecture %q is not one of llama, qwen2, qwen3", s.Arch)
	}
	if s.Heads == 0 || s.Dim%s.Heads != 0 || s.HeadsKV == 0 || s.Heads%s.HeadsKV != 0 {
		return nil, fmt.Errorf("random model: %d heads, %d KV heads and dim %d do not divide", s.Heads, s.HeadsKV, s.Dim)
	}
	hd := s.Dim / s.Heads
	w := gguf.NewWriter()
	a := s.Arch
	w.SetString("general.architecture", a)
	w.SetString("general.name", fmt.Sprintf("random %s %s seed %d", a, s.Type, s.Seed))
	w.SetUint32(a+".embedding_length", uint32(s.Dim))
	w.SetUint32(a+".block_count", uint32(s.Layers))
	w.SetUint32(a+".attention.head_count", uint32(s.Heads))
	w.SetUint32(a+".attention.head_count_kv", uint32(s.HeadsKV))
	w.SetUint32(a+".feed_forward_length", uint32(s.FFN))
	w.SetUint32(a+".context_length", uint32(s.Context))
	w.SetUint32(a+".rope.dimension_count", uint32(hd))
	w.SetFloat32(a+".rope.freq_base", 10000)
	w.SetFloat32(a+".attention.layer_norm_rms_epsilon", 1e-5)
	if s.WithVocab {
		if err := addVocab(w, s); err != nil {
			return nil, err
		}
	}

	add := func(name string, typ quant.Type, scale float32, offset float32, dims ...int) error {
		n := 1
		ud := make([]uint64, len(dims))
		for i, d := range dims {
			n *= d
			ud[i] = uint64(d)
		}
		vals := values(s.Seed, name, n, scale, offset)
		if err := w.AddTensorF32(name, typ, ud, vals); err != nil {
			return fmt.Errorf("random model: %w", err)
		}
		return nil
	}
	mat := func(name string, cols, rows int) error {
		return add(name, s.Type, float32(1/math.Sqrt(float64(cols))), 0, cols, rows)
	}
	vec := func(name string, n int, scale, offset float32) error {
		return add(name, quant.F32, scale, offset, n)
	}
	if err := add("token_embd.weight", s.Type, 1, 0, s.Dim, s.Vocab); err != nil {
		return nil, err
	}
	for l := 0; l < s.Layers; l++ {
		b := func(n string) string { return fmt.Sprintf("blk.%d.%s", l, n) }
		steps := []error{
			vec(b("attn_norm.weight"), s.Dim, 0.1, 1),
			mat(b("attn_q.weight"), s.Dim, s.Heads*hd),
			mat(b("attn_k.weight"), s.Dim, s.HeadsKV*hd),
			mat(b("attn_v.weight"), s.Dim, s.HeadsKV*hd),
			mat(b("attn_output.weight"), s.Heads*hd, s.Dim),
			vec(b("ffn_norm.weight"), s.Dim, 0.1, 1),
			mat(b("ffn_gate.weight"), s.Dim, s.FFN),
			mat(b("ffn_up.weight"), s.Dim, s.FFN),
			mat(b("ffn_down.weight"), s.FFN, s.Dim),
		}
		switch a {
		case "qwen2":
			steps = append(steps,
				vec(b("attn_q.bias"), s.Heads*hd, 0.2, 0),
				vec(b("attn_k.bias"), s.HeadsKV*hd, 0.2, 0),
				vec(b("attn_v.bias"), s.HeadsKV*hd, 0.2, 0))
		case "qwen3":
			steps = append(steps,
				vec(b("attn_q_norm.weight"), hd, 0.1, 1),
				vec(b("attn_k_norm.weight"), hd, 0.1, 1))
		}
		for _, err := range steps {
			if err != nil {
				return nil, err
			}
		}
	}
	if err := vec("output_norm.weight", s.Dim, 0.1, 1); err != nil {
		return nil, err
	}
	if s.RopeFactors {
		if err := vec("rope_freqs.weight", hd/2, 0.2, 1.5); err != nil {
			return nil, err
		}
	}
	if !s.Tied {
		// a larger head scale makes the output distribution peaky, as trained models are
		if err := add("output.weight", s.Type, float32(4/math.Sqrt(float64(s.Dim))), 0, s.Dim, s.Vocab); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// values returns n pseudo-random normal values * scale + offset determined by seed and name.
func values(seed uint64, name string, n int, scale, offset float32) []float32 {
	h := fnv.New64a()
	h.Write([]byte(name))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64())*scale + offset
	}
	return out
}

// addVocab writes a SentencePiece ("llama") vocabulary: <unk>, <s>, </s>, the 256 byte tokens,
// Words, then filler tokens up to s.Vocab.
func addVocab(w *gguf.Writer, s Spec) error {
	const (
		normal  = 1
		unknown = 2
		control = 3
		byteTok = 6
	)
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{unknown, control, control}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, byteTok)
	}
	for _, wd := range Words {
		tokens = append(tokens, wd)
		types = append(types, normal)
	}
	for i := 0; len(tokens) < s.Vocab; i++ {
		tokens = append(tokens, fmt.Sprintf("▁w%d", i))
		types = append(types, normal)
	}
	if len(tokens) > s.Vocab {
		return fmt.Errorf("random model: a vocabulary needs at least %d tokens, spec has %d", len(tokens), s.Vocab)
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		if types[i] == normal {
			scores[i] = -float32(i) // earlier words merge first
		}
	}
	w.SetString("tokenizer.ggml.model", "llama")
	w.SetStrings("tokenizer.ggml.tokens", tokens)
	w.SetFloat32s("tokenizer.ggml.scores", scores)
	w.SetInt32s("tokenizer.ggml.token_type", types)
	w.SetUint32("tokenizer.ggml.bos_token_id", 1)
	w.SetUint32("tokenizer.ggml.eos_token_id", 2)
	w.SetUint32("tokenizer.ggml.unknown_token_id", 0)
	w.SetBool("tokenizer.ggml.add_bos_token", true)
	w.SetBool("tokenizer.ggml.add_eos_token", false)
	if s.ChatTemplate != "" {
		w.SetString("tokenizer.chat_template", s.ChatTemplate)
	}
	return nil
}
