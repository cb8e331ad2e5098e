// Package tokenizer turns text into token ids and back exactly as llama.cpp does for the vocabularies
// stored in GGUF files: SentencePiece-style ("llama", SPM) and byte-level BPE ("gpt2") with the
// per-family pre-tokenizers, special/control tokens, and the add_bos/add_eos rules.
package tokenizer

import (
	"fmt"
	"strings"
)

// TokenType is the GGUF tokenizer.ggml.token_type value of a token.
type TokenType int32

// GGUF token types (the llama.cpp / sentencepiece numbering).
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// Vocab is the plain description of a tokenizer as GGUF metadata states it. FromGGUF fills it from a
// file; tests and tools may build one by hand and call New.
type Vocab struct {
	Model  string    // tokenizer.ggml.model: "llama" (SPM) or "gpt2" (byte-level BPE)
	Pre    string    // tokenizer.ggml.pre: pre-tokenizer family for BPE ("" = "default"; New refuses a name it does not know)
	Name   string    // general.name; llama.cpp keys a few per-model token attributes on it
	Tokens []string  // tokenizer.ggml.tokens
	Scores []float32 // tokenizer.ggml.scores (SPM merge priority); nil = all zero
	Types  []int32   // tokenizer.ggml.token_type; nil = all normal
	Merges []string  // tokenizer.ggml.merges for BPE, "left right", rank = index

	// Special token ids; -1 means "not stated" and the model type's default applies
	// (SPM: bos 1, eos 2, unk 0; BPE: bos 11, eos 11). Ids outside the vocabulary are ignored.
	BOS, EOS, UNK, EOT, EOM, PAD int

	// Optional flags from metadata; nil = the llama.cpp default for the model type.
	AddBOS, AddEOS, AddSpacePrefix *bool
}

// NewVocab returns a Vocab with every special id unset (-1).
func NewVocab() Vocab {
	return Vocab{BOS: -1, EOS: -1, UNK: -1, EOT: -1, EOM: -1, PAD: -1}
}

// token attributes, as llama.cpp derives them from the token type and a few name-based rules.
type attr uint16

const (
	attrUndefined attr = 0
	attrUnknown   attr = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrLStrip
	attrRStrip
)

func attrOf(t TokenType) attr {
	switch t {
	case TypeUnknown:
		return attrUnknown
	case TypeUnused:
		return attrUnused
	case TypeNormal:
		return attrNormal
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeByte:
		return attrByte
	default:
		return attrUndefined
	}
}

// kind of tokenizer algorithm.
type kind int

const (
	kindSPM kind = iota
	kindBPE
)

// end-of-turn texts that llama.cpp recognises by their text (and forces to control tokens).
var eotTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
	"<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
}

// end-of-generation texts: any of these ends generation.
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
	"<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
}

func validate(v *Vocab) error {
	if len(v.Tokens) == 0 {
		return fmt.Errorf("tokenizer.ggml.tokens: empty vocabulary, expected at least one token")
	}
	if v.Scores != nil && len(v.Scores) != len(v.Tokens) {
		return fmt.Errorf("tokenizer.ggml.scores: %d entries, expected %d (one per token)", len(v.Scores), len(v.Tokens))
	}
	if v.Types != nil && len(v.Types) != len(v.Tokens) {
		return fmt.Errorf("tokenizer.ggml.token_type: %d entries, expected %d (one per token)", len(v.Types), len(v.Tokens))
	}
	return nil
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
