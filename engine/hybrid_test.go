package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// A Gated DeltaNet hybrid reuses a previous request's prefix as the KV-cache models do (the
// runner restores a snapshot of its recurrent state and re-evaluates from there): the same
// prompt again (a rewind by one token), a longer prompt after a generated reply, and a shorter
// one each generate what a freshly loaded engine generates.
func TestRecurrentModelsReuseThePrefixLikeAFreshEngine(t *testing.T) {
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			path := modeltest.TinySynth(t, "", arch, quant.Q8_0, 9)
			load := func() *Engine {
				e, err := Load(context.Background(), LoadOptions{Path: path, Backend: BackendCPU, Threads: 2, Context: 256})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close() })
				return e
			}
			warm := load()
			prompts := []string{
				"Once upon a time there was a little girl",
				"Once upon a time there was a little girl",
				"Once upon a time there was a little girl who had a dog and a cat",
				"Once upon a time",
			}
			for i, p := range prompts {
				got, _ := collect(t, warm, GenerateRequest{Prompt: p, MaxTokens: 8})
				want, _ := collect(t, load(), GenerateRequest{Prompt: p, MaxTokens: 8})
				if !slices.Equal(got.Generated, want.Generated) {
					t.Fatalf("request %d %q: after the earlier requests %v, fresh %v", i, p, got.Generated, want.Generated)
				}
				if i == 1 && got.Timings.PromptTokens != 1 {
					t.Fatalf("the same prompt again evaluated %d prompt tokens, want 1 (the prefix reused)", got.Timings.PromptTokens)
				}
			}
		})
	}
}
