package model

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/gguf"
)

// loadQwen3 reads a qwen3-architecture model: llama's block with an RMSNorm over each Q and K
// head (one weight per head dimension, shared by all heads) before RoPE, and NEOX RoPE.
func loadQwen3(f *gguf.File) (*Model, error) {
	m, w, err := loadCommon(f, "qwen3", RopeNeoX)
	if err != nil {
		return nil, err
	}
	h := m.Hyper
	for i := range m.Layers {
		l := &m.Layers[i]
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		l.QNorm = w.vector(blk("attn_q_norm.weight"), h.HeadDim)
		l.KNorm = w.vector(blk("attn_k_norm.weight"), h.HeadDim)
	}
	return m, w.err
}
