package model

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/gguf"
)

// loadQwen3MoE reads a qwen3moe-architecture model (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's
// attention (per-head Q/K RMSNorm, NEOX RoPE) and in every layer a mixture-of-experts FFN
// instead of the dense one, without a shared expert.
func loadQwen3MoE(f *gguf.File) (*Model, error) {
	m, w, err := loadBase(f, "qwen3moe", RopeNeoX)
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
	if w.err != nil {
		return nil, w.err
	}
	if err := loadMoEFFN(f, m, w, false, true); err != nil {
		return nil, err
	}
	return m, nil
}
