package gguf_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

// A test model of any shape and tensor type, made from a seed.
func ExampleWriter() {
	rng := rand.New(rand.NewPCG(42, 0))
	weights := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.02)
		}
		return v
	}
	const dim, vocab = 64, 32
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	w.SetUint32("llama.embedding_length", dim)
	w.SetUint32("llama.block_count", 1)
	w.SetStrings("tokenizer.ggml.tokens", make([]string, vocab))
	if err := w.AddTensorF32("token_embd.weight", quant.Q8_0, []uint64{dim, vocab}, weights(dim*vocab)); err != nil {
		fmt.Println(err)
		return
	}
	if err := w.AddTensorF32("output_norm.weight", quant.F32, []uint64{dim}, weights(dim)); err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "gguf-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		fmt.Println(err)
		return
	}

	f, err := gguf.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	emb, _ := f.Tensor("token_embd.weight")
	n, _ := f.Uint("llama.embedding_length")
	fmt.Println(f.Architecture(), n, emb.Type, emb.Dims, emb.Size, f.ParamCount())
	// Output: llama 64 Q8_0 [64 32] 2176 2112
}
