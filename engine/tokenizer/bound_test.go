package tokenizer

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/sharedtest"
)

var boundVocabs = []string{"llama-spm", "phi-3", "gpt-2", "falcon", "deepseek-llm", "starcoder"}

// boundTexts are the reference cases plus texts built to be cheap in tokens: runs of the
// characters the longest tokens are made of, whitespace beside special tokens, random bytes.
func boundTexts(t *testing.T, tok *Tokenizer, base string) []string {
	inputs, _ := readVocabCases(t, base)
	longest := ""
	for _, s := range tok.tokens {
		if len(s) > len(longest) {
			longest = s
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rng.IntN(256))
	}
	return append(inputs,
		strings.Repeat(" ", 5000), strings.Repeat("\n", 5000), strings.Repeat("=", 5000),
		strings.Repeat(string(byteDecode(longest)), 50), strings.Repeat(strings.ReplaceAll(longest, "\u2581", " "), 50),
		"<|user|>"+strings.Repeat(" ", 3000)+"<|end|>"+strings.Repeat("\n", 3000)+"<s>",
		string(random))
}

func TestMinTokensNeverExceedsTheTokensOfAText(t *testing.T) {
	dir := sharedtest.Path(t, "reference/tokenizer")
	for _, name := range boundVocabs {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
			tok := loadTokenizer(t, base)
			if !tok.bound.ok {
				t.Fatalf("%s gives no bound", name)
			}
			tight := 0
			for _, text := range boundTexts(t, tok, base) {
				for _, special := range []bool{false, true} {
					n := len(tok.Encode(text, false, special))
					lower := tok.MinTokens(text)
					if lower > n {
						t.Fatalf("MinTokens = %d but %q (%d bytes, parseSpecial %v) has %d tokens", lower, text[:min(len(text), 40)], len(text), special, n)
					}
					if lower > 0 && lower*4 >= n {
						tight++
					}
					if max := tok.MaxTextBytes(n); max >= 0 && int64(len(text)) > max {
						t.Fatalf("MaxTextBytes(%d) = %d, but a %d-byte text has %d tokens", n, max, len(text), n)
					}
				}
			}
			if tight == 0 {
				t.Errorf("MinTokens never came within 4x of a text's tokens: the bound is useless")
			}
		})
	}
}

func TestEncodeContextEqualsEncode(t *testing.T) {
	dir := sharedtest.Path(t, "reference/tokenizer")
	for _, name := range boundVocabs {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
			tok := loadTokenizer(t, base)
			for _, text := range boundTexts(t, tok, base) {
				for _, add := range []bool{false, true} {
					want := tok.Encode(text, add, true)
					got, err := tok.EncodeContext(context.Background(), text, add, true, 0)
					if err != nil || !equalIDs(got, want) {
						t.Fatalf("EncodeContext(%q) = %v, %v; Encode gives %v", text[:min(len(text), 40)], got[:min(len(got), 10)], err, want[:min(len(want), 10)])
					}
				}
			}
		})
	}
}

// A text far over the limit stops as soon as the limit is passed, and a cancelled context
// stops it, instead of tokenizing the whole text.
func TestEncodeContextStopsEarly(t *testing.T) {
	tok := loadTokenizer(t, filepath.Join(sharedtest.Path(t, "reference/tokenizer"), "ggml-vocab-gpt-2.gguf"))
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200000) // 9 MB
	start := time.Now()
	_, err := tok.EncodeContext(context.Background(), text, true, true, 1000)
	if !errors.Is(err, ErrTooManyTokens) {
		t.Fatalf("EncodeContext with a limit of 1000: %v, want ErrTooManyTokens", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tok.EncodeContext(ctx, text, true, true, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("EncodeContext on a cancelled context: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("stopping early took %v", took)
	}
	small, err := tok.EncodeContext(context.Background(), "Hello world", true, true, 2)
	if err != nil || len(small) != 2 {
		t.Errorf("a text of exactly the limit: %v, %v", small, err)
	}
}
