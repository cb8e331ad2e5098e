package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
)

// qwen35Published is the pattern llama.cpp publishes for tokenizer.ggml.pre = "qwen35" (its
// case-insensitive contractions spelled out); testdata/qwen35_split.json was cut with it.
const qwen35Published = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// TestQwen35SplitsAsJavaScriptsRegex compares the hand-written qwen35 scanner with the words
// JavaScript's regex engine cuts with the published pattern (testdata/qwen35_split.mjs): llama.cpp's
// test strings for the qwen35 vocabulary and edge cases of contractions, combining marks, digits,
// CJK, emoji and white space.
func TestQwen35SplitsAsJavaScriptsRegex(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "qwen35_split.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Pattern string
		Cases   []struct {
			From string
			In   string
			Want []string
		}
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatalf("qwen35_split.json: %v", err)
	}
	if golden.Pattern != qwen35Published {
		t.Fatalf("qwen35_split.json was cut with %q, not the published pattern", golden.Pattern)
	}
	if len(golden.Cases) == 0 {
		t.Fatal("qwen35_split.json has no cases")
	}
	p, err := newPreTokenizer("qwen35")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range golden.Cases {
		if got := p.split(c.In); !slices.Equal(got, c.Want) {
			t.Errorf("%s case %d: split(%+q) = %+q, want %+q", c.From, i, c.In, got, c.Want)
		}
	}
}

func TestUnknownPreTokenizerIsRefusedNamingTheKeyAndTheSupportedNames(t *testing.T) {
	_, err := New(byteLevelVocab("no-such-family"))
	if err == nil {
		t.Fatal("New accepted tokenizer.ggml.pre = no-such-family")
	}
	for _, want := range []string{`tokenizer.ggml.pre "no-such-family" is not supported`, "(supported: ", "default",
		"llama-bpe", "qwen2", "qwen35"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	// From a file, the error names the file too; the same file with a known name loads.
	v := byteLevelVocab("no-such-family")
	w := gguf.NewWriter()
	w.SetString("general.architecture", "qwen35")
	w.SetString("tokenizer.ggml.model", "gpt2")
	w.SetString("tokenizer.ggml.pre", v.Pre)
	w.SetStrings("tokenizer.ggml.tokens", v.Tokens)
	w.SetInt32s("tokenizer.ggml.token_type", v.Types)
	w.SetStrings("tokenizer.ggml.merges", v.Merges)
	dir := t.TempDir()
	for _, c := range []struct {
		pre  string
		want string // "" = loads
	}{
		{"no-such-family", `tok.gguf: tokenizer: tokenizer.ggml.pre "no-such-family" is not supported: `},
		{"Qwen35", `tokenizer.ggml.pre "Qwen35" is not supported`}, // names are exact, as in llama.cpp
		{"qwen35", ""},
	} {
		w.SetString("tokenizer.ggml.pre", c.pre)
		path := filepath.Join(dir, c.pre, "tok.gguf")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = FromGGUF(f)
		f.Close()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.pre, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.pre, err, c.want)
		}
	}
}

func TestEveryKnownPreTokenizerNameIsAcceptedOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range preNames() {
		if seen[name] {
			t.Errorf("%q is listed under two families", name)
		}
		seen[name] = true
		tok, err := New(byteLevelVocab(name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tok.pre.name != name || len(tok.pre.steps) == 0 {
			t.Errorf("%s: built %q with %d steps", name, tok.pre.name, len(tok.pre.steps))
		}
	}
	// every name accepted before unknown names were refused is still accepted
	for _, name := range []string{"default", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en",
		"jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais", "llama3", "llama-v3",
		"llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "dbrx", "smaug-bpe", "qwen2",
		"deepseek-r1-qwen", "megrez", "deepseek-llm", "deepseek-coder", "falcon", "starcoder", "refact",
		"command-r", "smollm", "codeshell", "exaone", "minerva-7b", "qwen35"} {
		if !seen[name] {
			t.Errorf("%q is no longer known", name)
		}
	}
	// a missing key means the default rules, as in llama.cpp
	tok, err := New(byteLevelVocab(""))
	if err != nil || tok.pre.name != "default" {
		t.Errorf("missing tokenizer.ggml.pre: %v", err)
	}
}

// TestPreTokenizerFlagsFollowLlamaCpp spot-checks the flags that differ within a set of rules.
func TestPreTokenizerFlagsFollowLlamaCpp(t *testing.T) {
	cases := []struct {
		pre                          string
		addBOS, ignoreMerges, cleans bool
		bos                          int
	}{
		{"llama-bpe", true, true, true, 11},
		{"dbrx", false, false, true, 11},
		{"glm4", false, false, true, -1}, // no BOS unless the file names one
		{"qwen2", false, false, false, 11},
		{"qwen35", false, false, false, 11},
		{"megrez", false, false, true, 11}, // qwen2's rules, but llama.cpp keeps cleaning spaces
		{"stablelm2", false, false, true, 11},
		{"gpt-2", false, false, true, 11},
		{"trillion", false, false, false, 11},
		{"starcoder", false, false, true, 11},
		{"command-r", false, false, false, 11},
	}
	for _, c := range cases {
		v := byteLevelVocab(c.pre)
		tok, err := New(v)
		if err != nil {
			t.Fatal(err)
		}
		if tok.addBOS != c.addBOS || tok.pre.ignoreMerges != c.ignoreMerges || tok.cleanSpaces != c.cleans || tok.BOS() != c.bos {
			t.Errorf("%s: addBOS %v ignoreMerges %v cleanSpaces %v BOS %d, want %v %v %v %d",
				c.pre, tok.addBOS, tok.pre.ignoreMerges, tok.cleanSpaces, tok.BOS(), c.addBOS, c.ignoreMerges, c.cleans, c.bos)
		}
		v.BOS = 5
		if tok, err := New(v); err != nil || tok.BOS() != 5 {
			t.Errorf("%s: a stated bos_token_id is not kept", c.pre)
		}
	}
}
