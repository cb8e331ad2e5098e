package vulkan

// qwen3 (Qwen3 dense): llama's layer with a per-head RMSNorm of the queries and keys before
// the rotary embedding.
func init() {
	residentArchs["qwen3"] = residentArch{vectors: headNormVectors, layer: (*Resident).qwen3Layer}
}

func (r *Resident) qwen3Layer(s *Seq, l *layerWeights, m int) {
	r.attention(s, l, m, headNorms)
	r.denseFFN(s, l, m)
}
