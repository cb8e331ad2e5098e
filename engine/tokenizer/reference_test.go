package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/sharedtest"
)

// loaded caches tokenizers by path: several tests use the same reference vocabularies.
var loaded sync.Map // path -> *Tokenizer

func loadTokenizer(t testing.TB, path string) *Tokenizer {
	t.Helper()
	if tok, ok := loaded.Load(path); ok {
		return tok.(*Tokenizer)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	loaded.Store(path, tok)
	return tok
}

// readVocabCases reads llama.cpp's test-tokenizer-0 files: NAME.inp holds the strings, each followed
// by a line "__ggml_vocab_test__"; NAME.out one line of ids per string.
func readVocabCases(t *testing.T, base string) (inputs []string, want [][]int) {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	parts := strings.Split(string(inp), sep)
	if parts[len(parts)-1] != "" {
		t.Fatalf("%s.inp: last case not terminated by %q", base, sep)
	}
	inputs = parts[:len(parts)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%s: %d inputs but %d output lines", base, len(inputs), len(lines))
	}
	for i, l := range lines {
		var ids []int
		for _, f := range strings.Fields(l) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", base, i+1, err)
			}
			ids = append(ids, id)
		}
		want = append(want, ids)
	}
	return inputs, want
}

func TestEncodeMatchesLlamaCppOnEveryReferenceVocabCase(t *testing.T) {
	dir := sharedtest.Path(t, "reference/tokenizer")
	for _, name := range []string{"llama-spm", "phi-3", "gpt-2", "falcon", "deepseek-llm", "starcoder"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
			tok := loadTokenizer(t, base)
			inputs, want := readVocabCases(t, base)
			pass := 0
			for i, in := range inputs {
				got := tok.Encode(in, false, true)
				if !equalIDs(got, want[i]) {
					t.Errorf("case %d %q:\n got  %v\n want %v", i, in, got, want[i])
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d cases pass", name, pass, len(inputs))
		})
	}
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type generationCase struct {
	Prompt       string `json:"prompt"`
	PromptTokens []int  `json:"prompt_tokens"`
	Generated    []int  `json:"generated"`
	Text         string `json:"text"`
}

func TestEncodeMatchesLlamaCppPromptTokensOfSharedModels(t *testing.T) {
	refDir := sharedtest.Path(t, "reference/generation")
	modelDir := sharedtest.Path(t, "models")
	for _, name := range []string{"stories260K", "rand-llama-f32", "rand-llama-f16", "rand-llama-q8_0", "rand-llama-q4_0"} {
		t.Run(name, func(t *testing.T) {
			tok := loadTokenizer(t, filepath.Join(modelDir, name+".gguf"))
			cases := readGenerationCases(t, filepath.Join(refDir, name+".jsonl"))
			pass := 0
			for _, c := range cases {
				got := tok.Encode(c.Prompt, true, true)
				if !equalIDs(got, c.PromptTokens) {
					t.Errorf("prompt %q:\n got  %v\n want %v", c.Prompt, got, c.PromptTokens)
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d prompts pass", name, pass, len(cases))
		})
	}
}

func readGenerationCases(t *testing.T, path string) []generationCase {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var cases []generationCase
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var c generationCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s line %d: %v", path, len(cases)+1, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return cases
}
