package modeltest_test

import (
	"testing"

	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// Dequantize turns every quantized matrix the layers hold (attention, experts, the hybrids'
// DeltaNet, embedding and head) into F32 rows of exactly the decoded values.
func TestDequantizeDecodesEveryMatrix(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		arch string
		typ  quant.Type
	}{{"qwen3moe", quant.Q4_K}, {"qwen35moe", quant.Q8_0}, {"llama", quant.IQ4_XS}} {
		t.Run(tc.arch+"-"+tc.typ.String(), func(t *testing.T) {
			path := modeltest.TinySynth(t, dir, tc.arch, tc.typ, 3)
			orig, dq := modeltest.Load(t, path), modeltest.Load(t, path)
			modeltest.Dequantize(t, dq)
			type pair struct{ a, b *model.Matrix }
			var pairs []pair
			pairs = append(pairs, pair{&orig.TokenEmbd, &dq.TokenEmbd}, pair{&orig.Output, &dq.Output})
			for i := range orig.Layers {
				lo, ld := &orig.Layers[i], &dq.Layers[i]
				for _, p := range []pair{{&lo.Q, &ld.Q}, {&lo.O, &ld.O}, {&lo.Down, &ld.Down}} {
					pairs = append(pairs, p)
				}
				if lo.MoE != nil {
					last := len(lo.MoE.Up.Matrices) - 1
					pairs = append(pairs, pair{&lo.MoE.Up.Matrices[last], &ld.MoE.Up.Matrices[last]}, pair{&lo.MoE.Router, &ld.MoE.Router})
					if ld.MoE.Up.Type != quant.F32 {
						t.Errorf("layer %d: experts still typed %v", i, ld.MoE.Up.Type)
					}
				}
				if lo.DeltaNet != nil {
					pairs = append(pairs, pair{&lo.DeltaNet.QKV, &ld.DeltaNet.QKV})
				}
			}
			quantized := 0
			for _, p := range pairs {
				if len(p.a.Data) == 0 {
					continue
				}
				if p.b.Type != quant.F32 || p.b.RowBytes != 4*p.b.Cols {
					t.Fatalf("%s: %v with %d-byte rows after Dequantize", p.b.Name, p.b.Type, p.b.RowBytes)
				}
				if p.a.Type != quant.F32 {
					quantized++
				}
				last := p.a.Rows - 1
				want, got := make([]float32, p.a.Cols), make([]float32, p.a.Cols)
				if err := quant.Dequantize(p.a.Type, p.a.Row(last), want); err != nil {
					t.Fatal(err)
				}
				if err := quant.Dequantize(quant.F32, p.b.Row(last), got); err != nil {
					t.Fatal(err)
				}
				for j := range want {
					if got[j] != want[j] {
						t.Fatalf("%s row %d element %d: %v, decoded %v", p.a.Name, last, j, got[j], want[j])
					}
				}
			}
			if quantized == 0 {
				t.Fatalf("no quantized matrix among the %d checked: the model is not %v", len(pairs), tc.typ)
			}
		})
	}
}
