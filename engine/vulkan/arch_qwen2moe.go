package vulkan

// qwen2moe (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): qwen2's attention (its Q, K and V biases
// optional) and a mixture of experts with a shared expert under a sigmoid gate for the FFN.
func init() {
	residentArchs["qwen2moe"] = residentArch{vectors: qkvBiasVectors(true), layer: (*Resident).qwen2moeLayer}
}

func (r *Resident) qwen2moeLayer(s *Seq, l *layerWeights, m int) {
	r.attention(s, l, m, qkvBias)
	r.moeFFN(s, l, m)
}
