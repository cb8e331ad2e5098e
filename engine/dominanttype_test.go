package engine

import (
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// The model's quant label is the type of most weight bytes: for a mixture of experts that is
// the experts' type, not the attention's (the experts hold most of the bytes).
func TestDominantTypeCountsExpertBytes(t *testing.T) {
	mat := func(typ quant.Type, n int) model.Matrix { return model.Matrix{Type: typ, Data: make([]byte, n)} }
	attn := func(l *model.Layer) {
		l.Q, l.K, l.V, l.O = mat(quant.Q8_0, 100), mat(quant.Q8_0, 100), mat(quant.Q8_0, 100), mat(quant.Q8_0, 100)
	}
	experts := func(n int) model.Experts {
		return model.Experts{Type: quant.IQ2_XXS, Matrices: []model.Matrix{mat(quant.IQ2_XXS, n), mat(quant.IQ2_XXS, n)}}
	}
	moe := model.Layer{MoE: &model.MoE{Router: mat(quant.F32, 10), Gate: experts(200), Up: experts(200), Down: experts(200)}}
	attn(&moe)
	dense := model.Layer{Gate: mat(quant.Q4_K, 300), Up: mat(quant.Q4_K, 300), Down: mat(quant.Q4_K, 300)}
	attn(&dense)
	for _, tc := range []struct {
		name  string
		layer model.Layer
		want  quant.Type
	}{
		{"mixture of experts", moe, quant.IQ2_XXS},
		{"dense", dense, quant.Q4_K},
	} {
		m := &model.Model{TokenEmbd: mat(quant.Q6_K, 1), Layers: []model.Layer{tc.layer, tc.layer}}
		if got := dominantType(m); got != tc.want {
			t.Errorf("%s: dominant type %v, want %v", tc.name, got, tc.want)
		}
	}
}
