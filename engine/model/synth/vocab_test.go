package synth

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/tokenizer"
)

// A shape's larger vocabulary pads the source's with unused tokens: the embedding and head
// take the shape's size, the tokenizer's arrays stay one entry a token and it still builds; a
// smaller one than the source is refused. (Header only: the vocabulary is metadata.)
func TestShapeVocabPadsTheSourceVocabulary(t *testing.T) {
	src := embeddedVocab(t)
	srcTokens, _ := src.Strings("tokenizer.ggml.tokens")
	shape, err := Preset("qwen35moe", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	mix := Mixes["ud-iq2_xxs"]
	for _, tc := range []struct {
		name    string
		vocab   int
		want    int
		refused bool
	}{
		{"unset keeps the source's", 0, len(srcTokens), false},
		{"larger pads", 1000, 1000, false},
		{"smaller is refused", len(srcTokens) - 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := shape
			s.Vocab = tc.vocab
			path := filepath.Join(t.TempDir(), "m.gguf")
			_, err := Write(context.Background(), path, Options{Arch: "qwen35moe", Shape: s, Mix: &mix, Vocab: src, Seed: 5, HeaderOnly: true})
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), "more than the shape's") {
					t.Fatalf("err %v, want a refusal naming the sizes", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f, err := gguf.OpenHeader(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			toks, _ := f.Strings("tokenizer.ggml.tokens")
			scores, _ := f.Float32s("tokenizer.ggml.scores")
			types, _ := f.Int32s("tokenizer.ggml.token_type")
			embd, _ := f.Tensor("token_embd.weight")
			head, _ := f.Tensor("output.weight")
			if len(toks) != tc.want || len(scores) != tc.want || len(types) != tc.want || embd.Dims[1] != uint64(tc.want) || head.Dims[1] != uint64(tc.want) {
				t.Fatalf("tokens %d scores %d types %d embedding %v head %v, want %d each", len(toks), len(scores), len(types), embd.Dims, head.Dims, tc.want)
			}
			if tc.vocab > len(srcTokens) && (types[tc.want-1] != int32(tokenizer.TypeUnused) || toks[len(srcTokens)] != "<|synth_unused_0|>") {
				t.Fatalf("padding: last type %d, first pad %q", types[tc.want-1], toks[len(srcTokens)])
			}
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatalf("tokenizer of the padded vocabulary: %v", err)
			}
			if ids := tok.Encode("Once upon a time", false, false); len(ids) == 0 {
				t.Fatal("the padded tokenizer encodes nothing")
			}
		})
	}
}
