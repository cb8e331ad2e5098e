package planinput

import (
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/plan"
)

// hybridHeader writes the metadata of a qwen35moe model shaped like the seed's (Qwen3.6-35B-A3B:
// 40 layers, dim 2048, DeltaNet 32 value heads and 16 query/key heads of 128, conv kernel 4,
// gated attention 16 heads, 2 KV heads of 256) with the given extra keys, no tensors.
func hybridHeader(t *testing.T, extra map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	w.SetString("general.architecture", "qwen35moe")
	for k, v := range map[string]uint32{
		"embedding_length": 2048, "block_count": 40, "attention.head_count": 16, "attention.head_count_kv": 2,
		"attention.key_length": 256, "attention.value_length": 256, "context_length": 262144,
		"expert_count": 256, "expert_used_count": 8, "expert_feed_forward_length": 512,
		"ssm.conv_kernel": 4, "ssm.state_size": 128, "ssm.group_count": 16, "ssm.time_step_rank": 32, "ssm.inner_size": 4096,
	} {
		w.SetUint32("qwen35moe."+k, v)
	}
	for k, v := range extra {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.OpenBytes("seed-shape.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestHybridModelCountsRecurrentLayersAndTheirState(t *testing.T) {
	// One recurrent layer's state: conv (4-1)·(2·16·128 + 32·128) + delta 32·128·128 floats.
	const layerState = 4 * (3*(2*16*128+32*128) + 32*128*128)
	for _, tc := range []struct {
		name      string
		extra     map[string]any
		recurrent int
	}{
		{"default interval 4", nil, 30},
		{"interval 4 written", map[string]any{"qwen35moe.full_attention_interval": uint32(4)}, 30},
		{"interval 2", map[string]any{"qwen35moe.full_attention_interval": uint32(2)}, 20},
		{"a prediction layer after the trunk", map[string]any{"qwen35moe.nextn_predict_layers": uint32(1)}, 30}, // 39 trunk layers: 30 recurrent
		{"listed layers win", map[string]any{"qwen35moe.full_attention_interval": uint32(2),
			"qwen35moe.attention.recurrent_layers": append(make([]bool, 30), true, true, true)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ModelOf(hybridHeader(t, tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			if m.RecurrentLayers != tc.recurrent || m.AttentionLayers() != 40-tc.recurrent || !m.AttnGate {
				t.Fatalf("recurrent %d attention %d gate %v, want %d and %d, gated", m.RecurrentLayers, m.AttentionLayers(), m.AttnGate, tc.recurrent, 40-tc.recurrent)
			}
			if got := m.RecurrentLayerBytes(); got != layerState {
				t.Fatalf("recurrent layer state %d bytes, want %d", got, layerState)
			}
			kv := plan.KVFor(m)
			wantPerPos := int64(40-tc.recurrent) * 2 * (2 * 256 * 2) // K and V rows of the attention layers, f16
			if kv.PerPos != wantPerPos || kv.SidePerPos != wantPerPos/2 {
				t.Fatalf("kv %+v, want %d bytes per position", kv, wantPerPos)
			}
			s := plan.ScratchFor(m)
			// the live state and two snapshot slots per recurrent layer
			if s.RecurrentState != 3*int64(tc.recurrent)*layerState || s.Total != s.Activations+s.Logits+s.AttnPartials+s.RecurrentState+s.Slack {
				t.Fatalf("scratch %+v, want recurrent state %d", s, 3*int64(tc.recurrent)*layerState)
			}
		})
	}
}

func TestHybridModelNamesAMissingRecurrentKey(t *testing.T) {
	w := gguf.NewWriter()
	w.SetString("general.architecture", "qwen35")
	for k, v := range map[string]uint32{"embedding_length": 256, "block_count": 4, "attention.head_count": 4,
		"ssm.conv_kernel": 4, "ssm.state_size": 32, "ssm.group_count": 2} {
		w.SetUint32("qwen35."+k, v)
	}
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.OpenBytes("no-dt-rank.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ModelOf(f); err == nil || !strings.Contains(err.Error(), "qwen35.ssm.time_step_rank") {
		t.Fatalf("err %v, want one naming qwen35.ssm.time_step_rank", err)
	}
}

// A dense model's plan is what it was: every layer keeps K and V, no recurrent state.
func TestDenseModelHasNoRecurrentTerms(t *testing.T) {
	m, err := ModelOf(tinyGGUF(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.RecurrentLayers != 0 || m.RecurrentLayerBytes() != 0 || m.AttnGate || plan.ScratchFor(m).RecurrentState != 0 {
		t.Fatalf("dense model %+v has recurrent terms", m)
	}
	if kv := plan.KVFor(m); kv.PerPos != int64(m.Layers)*int64(m.HeadsKV)*int64(m.HeadDimK+m.HeadDimV)*2 {
		t.Fatalf("kv %+v", kv)
	}
}

// The breakdown says which layers keep a cache and what the recurrent ones keep instead.
func TestHybridBreakdownNamesTheRecurrentLayers(t *testing.T) {
	m, err := ModelOf(hybridHeader(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Compute(plan.Input{Model: m, KV: plan.KVFor(m), Scratch: plan.ScratchFor(m),
		Device: plan.Device{Name: "16 GB card", HeapBytes: 16303 << 20}, Ctx: plan.CtxRequest{Requested: 4096}})
	b := p.Breakdown()
	for _, want := range []string{"10 attention layers keep K and V; 30 recurrent (DeltaNet) layers keep a 2144 KB state each", "recurrent state 189 MB"} {
		if !strings.Contains(b, want) {
			t.Fatalf("breakdown lacks %q:\n%s", want, b)
		}
	}
}
