package vulkan

// qwen35 (Qwen3.5 dense): the Gated-DeltaNet hybrid. Each layer is a DeltaNet block (three of
// every four in the published models) or gated attention, then the dense SwiGLU FFN (its
// pre-norm the file's post_attention_norm).
func init() {
	residentArchs["qwen35"] = residentArch{vectors: hybridVectors, layer: (*Resident).qwen35Layer}
}

func (r *Resident) qwen35Layer(s *Seq, l *layerWeights, m int) {
	if l.dn != nil {
		r.deltaNet(s, l, m)
	} else {
		r.gatedAttention(s, l, m)
	}
	r.denseFFN(s, l, m)
}
