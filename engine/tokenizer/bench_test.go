package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/sharedtest"
)

// BenchmarkEncode tokenizes ~20 KB of mixed text with each kind of reference vocabulary
// (go test -bench Encode -benchmem ./engine/tokenizer/).
func BenchmarkEncode(b *testing.B) {
	dir := sharedtest.Path(b, "reference/tokenizer")
	words := []string{"hello", " world", "日本語", "\n", "  ", "123456", "!?", "é", "don't", " the", " quick", " brown"}
	var sb strings.Builder
	for i := 0; sb.Len() < 20000; i++ {
		sb.WriteString(words[(i*7+i/3)%len(words)])
	}
	text := sb.String()
	for _, name := range []string{"llama-spm", "gpt-2", "deepseek-llm"} {
		tok := loadTokenizer(b, filepath.Join(dir, "ggml-vocab-"+name+".gguf"))
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for i := 0; i < b.N; i++ {
				tok.Encode(text, true, true)
			}
		})
	}
}
