package vulkan

// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's attention with per-head Q/K norms and a
// mixture of experts for the FFN, without a shared expert.
func init() {
	residentArchs["qwen3moe"] = residentArch{vectors: headNormVectors, layer: (*Resident).qwen3moeLayer}
}

func (r *Resident) qwen3moeLayer(s *Seq, l *layerWeights, m int) {
	r.attention(s, l, m, headNorms)
	r.moeFFN(s, l, m)
}
