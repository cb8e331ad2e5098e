package model

import "github.com/vkllm/vkllm/engine/gguf"

// loadLlama reads a llama-architecture model (llama 2/3, Mistral, TinyStories, SmolLM): pre-norm
// blocks of GQA attention and a SwiGLU FFN, no biases. The converter permuted Q and K rows so the
// normal (adjacent-pair) RoPE applies.
func loadLlama(f *gguf.File) (*Model, error) {
	m, _, err := loadCommon(f, "llama", RopeNormal)
	return m, err
}
