package model

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/gguf"
)

// loadQwen2MoE reads a qwen2moe-architecture model (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): qwen2's
// attention (Q, K and V biases where the file has them, NEOX RoPE) and in every layer a
// mixture-of-experts FFN with a shared expert under a sigmoid gate. llama.cpp does not
// renormalise its selected weights.
func loadQwen2MoE(f *gguf.File) (*Model, error) {
	m, w, err := loadBase(f, "qwen2moe", RopeNeoX)
	if err != nil {
		return nil, err
	}
	h := m.Hyper
	for i := range m.Layers {
		l := &m.Layers[i]
		blk := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		l.QBias = w.optionalVector(blk("attn_q.bias"), h.QDim())
		l.KBias = w.optionalVector(blk("attn_k.bias"), h.KDim())
		l.VBias = w.optionalVector(blk("attn_v.bias"), h.VDim())
	}
	if w.err != nil {
		return nil, w.err
	}
	if err := loadMoEFFN(f, m, w, true, false); err != nil {
		return nil, err
	}
	if m.Layers[0].MoE.Shared == nil {
		return nil, fmt.Errorf("tensor %q is missing: qwen2moe has a shared expert in every layer", "blk.0.ffn_up_shexp.weight")
	}
	return m, nil
}
