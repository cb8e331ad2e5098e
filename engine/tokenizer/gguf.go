package tokenizer

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/gguf"
)

// VocabFromGGUF reads the tokenizer.ggml.* metadata of a GGUF file into a Vocab.
func VocabFromGGUF(f *gguf.File) (Vocab, error) {
	v := NewVocab()
	var ok bool
	if v.Model, ok = f.String("tokenizer.ggml.model"); !ok {
		return v, fmt.Errorf("gguf %s: tokenizer.ggml.model is missing; the file has no tokenizer", f.Path)
	}
	v.Pre, _ = f.String("tokenizer.ggml.pre")
	v.Name, _ = f.String("general.name")
	if v.Tokens, ok = f.Strings("tokenizer.ggml.tokens"); !ok {
		return v, fmt.Errorf("gguf %s: tokenizer.ggml.tokens is missing or not a string array", f.Path)
	}
	if _, present := f.Get("tokenizer.ggml.scores"); present {
		if v.Scores, ok = f.Float32s("tokenizer.ggml.scores"); !ok {
			return v, fmt.Errorf("gguf %s: tokenizer.ggml.scores is not a float array", f.Path)
		}
	}
	if _, present := f.Get("tokenizer.ggml.token_type"); present {
		if v.Types, ok = f.Int32s("tokenizer.ggml.token_type"); !ok {
			return v, fmt.Errorf("gguf %s: tokenizer.ggml.token_type is not an integer array", f.Path)
		}
	}
	if v.Model == "gpt2" {
		if v.Merges, ok = f.Strings("tokenizer.ggml.merges"); !ok {
			return v, fmt.Errorf("gguf %s: tokenizer.ggml.merges is missing; a BPE (gpt2) tokenizer needs its merges", f.Path)
		}
	}
	for key, dst := range map[string]*int{
		"tokenizer.ggml.bos_token_id":     &v.BOS,
		"tokenizer.ggml.eos_token_id":     &v.EOS,
		"tokenizer.ggml.unknown_token_id": &v.UNK,
		"tokenizer.ggml.eot_token_id":     &v.EOT,
		"tokenizer.ggml.eom_token_id":     &v.EOM,
		"tokenizer.ggml.padding_token_id": &v.PAD,
	} {
		if id, ok := f.Uint(key); ok && id < uint64(len(v.Tokens)) {
			*dst = int(id)
		}
	}
	for key, dst := range map[string]**bool{
		"tokenizer.ggml.add_bos_token":    &v.AddBOS,
		"tokenizer.ggml.add_eos_token":    &v.AddEOS,
		"tokenizer.ggml.add_space_prefix": &v.AddSpacePrefix,
	} {
		if b, ok := f.Bool(key); ok {
			*dst = &b
		}
	}
	return v, nil
}

// FromGGUF builds the tokenizer stored in a GGUF file's metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: tokenizer: %w", f.Path, err)
	}
	return t, nil
}
