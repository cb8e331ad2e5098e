package vulkan

// llama (and the Mistral-family files that say llama): pre-norm attention with the rotary
// embedding and a SwiGLU FFN, nothing added to the projections.
func init() { residentArchs["llama"] = residentArch{layer: (*Resident).llamaLayer} }

func (r *Resident) llamaLayer(s *Seq, l *layerWeights, m int) {
	r.attention(s, l, m, nil)
	r.denseFFN(s, l, m)
}
