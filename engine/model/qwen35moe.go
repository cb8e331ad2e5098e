package model

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/gguf"
)

// loadQwen35MoE reads a qwen35moe-architecture model (Qwen3.5 MoE): qwen35's layers with a
// mixture-of-experts FFN (softmax routing, the selected weights renormalised) and a shared
// expert under a sigmoid gate in every layer.
func loadQwen35MoE(f *gguf.File) (*Model, error) {
	m, w, err := loadHybrid(f, "qwen35moe")
	if err != nil {
		return nil, err
	}
	if err := loadMoEFFN(f, m, w, true, true); err != nil {
		return nil, err
	}
	if m.Layers[0].MoE.Shared == nil {
		return nil, fmt.Errorf("tensor %q is missing: qwen35moe has a shared expert in every layer", "blk.0.ffn_up_shexp.weight")
	}
	return m, nil
}
