package vulkan

// qwen35moe (Qwen3.5 MoE): qwen35's DeltaNet and gated attention layers with a mixture of
// experts and its shared expert under a sigmoid gate for the FFN.
func init() {
	residentArchs["qwen35moe"] = residentArch{vectors: hybridVectors, layer: (*Resident).qwen35moeLayer}
}

func (r *Resident) qwen35moeLayer(s *Seq, l *layerWeights, m int) {
	if l.dn != nil {
		r.deltaNet(s, l, m)
	} else {
		r.gatedAttention(s, l, m)
	}
	r.moeFFN(s, l, m)
}
