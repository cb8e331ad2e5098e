package model_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// synth's tiny qwen35 and qwen35moe: four layers, the fourth gated attention, the others Gated
// DeltaNet, each read with its shape and the FFN's pre-norm from post_attention_norm.
func TestQwen35LayersFollowTheAttentionInterval(t *testing.T) {
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			data, err := os.ReadFile(modeltest.TinySynth(t, "", arch, quant.Q8_0, 2))
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(open(t, data))
			if err != nil {
				t.Fatal(err)
			}
			h := m.Hyper
			if want := []bool{true, true, true, false}; !reflect.DeepEqual(h.Recurrent, want) {
				t.Fatalf("recurrent layers %v, want %v", h.Recurrent, want)
			}
			if want := (model.SSMParams{ConvKernel: 4, StateSize: 64, KHeads: 2, VHeads: 4}); h.SSM != want {
				t.Fatalf("ssm %+v, want %+v", h.SSM, want)
			}
			if h.Rope.Kind != model.RopeNeoX || h.Rope.Dims != 16 || h.Rope.Sections != [4]int{3, 3, 2, 0} {
				t.Fatalf("rope %+v", h.Rope)
			}
			for i, l := range m.Layers {
				if (l.DeltaNet != nil) != h.IsRecurrent(i) || l.FFNNorm.Name != "blk."+string(rune('0'+i))+".post_attention_norm.weight" {
					t.Fatalf("layer %d: delta net %v, FFN norm %q", i, l.DeltaNet != nil, l.FFNNorm.Name)
				}
			}
			if q := m.Layers[3].Q; q.Rows != 2*h.QDim() {
				t.Fatalf("gated attention's Q has %d rows, want query and gate: %d", q.Rows, 2*h.QDim())
			}
			if d := m.Layers[0].DeltaNet; d.QKV.Rows != h.SSM.ConvDim() || len(d.Conv) != 4*h.SSM.ConvDim() || d.A.Values[0] >= 0 {
				t.Fatalf("delta net: qkv %d rows, conv %d taps, A[0] %v", d.QKV.Rows, len(d.Conv), d.A.Values[0])
			}
			if (arch == "qwen35moe") != (m.Layers[0].MoE != nil && m.Layers[0].MoE.Shared != nil) {
				t.Fatalf("%s: MoE %v", arch, m.Layers[0].MoE)
			}
		})
	}
}

// Each key the Gated DeltaNet needs is refused by name when absent; the file with every key
// loads (the negative control).
func TestQwen35RefusesAMissingSSMKey(t *testing.T) {
	src, err := gguf.Open(modeltest.TinySynth(t, "", "qwen35", quant.Q8_0, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	without := func(key string) []byte {
		w := gguf.NewWriter()
		for _, kv := range src.KV {
			if kv.Key != key && !strings.HasPrefix(kv.Key, "general.alignment") {
				w.SetValue(kv.Key, kv.Value)
			}
		}
		for _, ti := range src.Tensors {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
		}
		data, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if _, err := model.Load(open(t, without(""))); err != nil {
		t.Fatalf("every key: %v", err)
	}
	for _, key := range []string{"qwen35.ssm.conv_kernel", "qwen35.ssm.state_size", "qwen35.ssm.group_count",
		"qwen35.ssm.time_step_rank", "qwen35.ssm.inner_size", "qwen35.rope.dimension_sections"} {
		if _, err := model.Load(open(t, without(key))); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("without %s: err %v, want it named", key, err)
		}
	}
}

// Interleaved M-RoPE gives pair i to section i%3 while i < 3×that section's size; the rest
// belong to the fourth, whose text position is 0, so they stay still.
func TestRopeStillPairsAreTheFourthSections(t *testing.T) {
	cases := []struct {
		sections [4]int
		pairs    int
		still    []int
	}{
		{[4]int{11, 11, 10, 0}, 32, nil},     // Qwen3.5: every pair rotates
		{[4]int{3, 3, 2, 0}, 8, nil},         // synth's tiny
		{[4]int{4, 2, 2, 0}, 8, []int{7}},    // 7%3 = 1 but 7 >= 3×2
		{[4]int{2, 2, 2, 2}, 8, []int{6, 7}}, // the fourth section's two pairs
		{[4]int{}, 8, nil},                   // no sections: plain RoPE
	}
	for _, tc := range cases {
		r := model.Rope{Sections: tc.sections}
		var still []int
		for i := 0; i < tc.pairs; i++ {
			if r.StillPair(i) {
				still = append(still, i)
			}
		}
		if !reflect.DeepEqual(still, tc.still) {
			t.Errorf("sections %v: still pairs %v, want %v", tc.sections, still, tc.still)
		}
	}
}
