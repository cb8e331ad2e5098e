package model

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/gguf"
)

// loadQwen2 reads a qwen2-architecture model: llama's block with biases on the Q, K and V
// projections and NEOX RoPE.
func loadQwen2(f *gguf.File) (*Model, error) {
	m, w, err := loadCommon(f, "qwen2", RopeNeoX)
	if err != nil {
		return nil, err
	}
	h := m.Hyper
	for i := range m.Layers {
		l := &m.Layers[i]
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		l.QBias = w.vector(blk("attn_q.bias"), h.QDim())
		l.KBias = w.vector(blk("attn_k.bias"), h.KDim())
		l.VBias = w.vector(blk("attn_v.bias"), h.VDim())
	}
	return m, w.err
}
