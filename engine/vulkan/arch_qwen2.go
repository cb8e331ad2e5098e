package vulkan

// qwen2 (Qwen2, Qwen2.5): llama's layer with biases on the Q, K and V projections.
func init() {
	residentArchs["qwen2"] = residentArch{vectors: qkvBiasVectors(false), layer: (*Resident).qwen2Layer}
}

func (r *Resident) qwen2Layer(s *Seq, l *layerWeights, m int) {
	r.attention(s, l, m, qkvBias)
	r.denseFFN(s, l, m)
}
