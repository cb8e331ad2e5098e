package model_test

import (
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"os"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/quant"
)

// tinyMoE is the bytes of synth's tiny qwen3moe (8 experts, 2 used, dim 256, expert width 128).
func tinyMoE(t *testing.T, typ quant.Type) []byte {
	t.Helper()
	path := modeltest.TinySynth(t, "", "qwen3moe", typ, 3)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// edited copies data's keys and tensors into a new file: keys and tensors for which the edit
// functions return true are left out (they may add replacements to w).
func edited(t *testing.T, data []byte, key func(w *gguf.Writer, k string) bool, tensor func(w *gguf.Writer, ti *gguf.TensorInfo) bool) []byte {
	t.Helper()
	f := open(t, data)
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if key == nil || !key(w, kv.Key) {
			w.SetValue(kv.Key, kv.Value)
		}
	}
	for _, ti := range f.Tensors {
		if tensor != nil && tensor(w, &ti) {
			continue
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

func TestQwen3MoELoadsRouterAndExperts(t *testing.T) {
	m, err := model.Load(open(t, tinyMoE(t, quant.Q8_0)))
	if err != nil {
		t.Fatal(err)
	}
	p := m.Hyper.MoE
	want := model.MoEParams{Experts: 8, Used: 2, FFN: 128, Gating: model.GatingSoftmax, NormWeights: true, WeightsScale: 1}
	if p != want {
		t.Fatalf("routing %+v, want %+v (llama.cpp's qwen3moe defaults for absent keys)", p, want)
	}
	if m.Hyper.Rope.Kind != model.RopeNeoX {
		t.Fatalf("rope %v, want neox", m.Hyper.Rope.Kind)
	}
	l := m.Layers[1]
	if l.MoE == nil || l.MoE.Shared != nil || !l.QNorm.Present() || l.Gate.Data != nil {
		t.Fatalf("layer 1: moe %v, q norm %v, dense gate %d bytes", l.MoE, l.QNorm.Present(), len(l.Gate.Data))
	}
	mo := l.MoE
	if mo.Router.Rows != 8 || mo.Router.Cols != 256 || mo.Router.Type != quant.F32 {
		t.Fatalf("router %dx%d %s", mo.Router.Rows, mo.Router.Cols, mo.Router.Type)
	}
	// expert e is the e-th slice of the 3-D tensor, each slice its own matrix
	for _, x := range []model.Experts{mo.Gate, mo.Up, mo.Down} {
		if x.Count != 8 || len(x.Matrices) != 8 {
			t.Fatalf("%s: %d experts", x.Name, len(x.Matrices))
		}
		per := len(x.Info.Data) / 8
		for e, mat := range x.Matrices {
			if mat.Rows != x.Rows || mat.Cols != x.Cols || len(mat.Data) != per || &mat.Data[0] != &x.Info.Data[e*per] {
				t.Fatalf("%s expert %d: %dx%d, %d bytes, not the slice at %d", x.Name, e, mat.Rows, mat.Cols, len(mat.Data), e*per)
			}
			if mat.Row(mat.Rows - 1)[0] != x.Info.Data[(e+1)*per-mat.RowBytes] {
				t.Fatalf("%s expert %d: last row is not the slice's", x.Name, e)
			}
		}
	}
	if mo.Gate.Rows != 128 || mo.Gate.Cols != 256 || mo.Down.Rows != 256 || mo.Down.Cols != 128 {
		t.Fatalf("gate %dx%d down %dx%d", mo.Gate.Rows, mo.Gate.Cols, mo.Down.Rows, mo.Down.Cols)
	}
	mats := l.Matrices()
	if len(mats) != 4+1+3*8 {
		t.Fatalf("layer matrices %d, want q k v o, the router and 24 experts", len(mats))
	}
}

func TestQwen3MoERoutingKeysAreRead(t *testing.T) {
	data := tinyMoE(t, quant.Q8_0)
	m, err := model.Load(open(t, edited(t, data, func(w *gguf.Writer, k string) bool {
		if k == "qwen3moe.expert_used_count" {
			w.SetUint32("qwen3moe.expert_gating_func", 2)
			w.SetBool("qwen3moe.expert_weights_norm", false)
			w.SetFloat32("qwen3moe.expert_weights_scale", 2.5)
		}
		return false
	}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if p := m.Hyper.MoE; p.Gating != model.GatingSigmoid || p.NormWeights || p.WeightsScale != 2.5 {
		t.Fatalf("routing %+v", p)
	}
}

func TestBadMoEModelsAreRefusedWithTheCause(t *testing.T) {
	data := tinyMoE(t, quant.Q8_0)
	setKey := func(key string, apply func(w *gguf.Writer)) func(w *gguf.Writer, k string) bool {
		return func(w *gguf.Writer, k string) bool {
			if k == key {
				apply(w)
				return true
			}
			return false
		}
	}
	dropKey := func(key string) func(w *gguf.Writer, k string) bool {
		return func(w *gguf.Writer, k string) bool { return k == key }
	}
	dropTensor := func(name string) func(w *gguf.Writer, ti *gguf.TensorInfo) bool {
		return func(w *gguf.Writer, ti *gguf.TensorInfo) bool { return ti.Name == name }
	}
	reshape := func(name string, dims ...uint64) func(w *gguf.Writer, ti *gguf.TensorInfo) bool {
		return func(w *gguf.Writer, ti *gguf.TensorInfo) bool {
			if ti.Name != name {
				return false
			}
			if err := w.AddTensor(ti.Name, ti.Type, dims, ti.Data); err != nil {
				t.Fatal(err)
			}
			return true
		}
	}
	cases := []struct {
		name   string
		key    func(w *gguf.Writer, k string) bool
		tensor func(w *gguf.Writer, ti *gguf.TensorInfo) bool
		want   string
	}{
		{"more used than experts", setKey("qwen3moe.expert_used_count", func(w *gguf.Writer) { w.SetUint32("qwen3moe.expert_used_count", 9) }), nil,
			"qwen3moe.expert_used_count = 9 exceeds qwen3moe.expert_count = 8"},
		{"no expert count", dropKey("qwen3moe.expert_count"), nil, "qwen3moe.expert_count is missing"},
		{"no used count", dropKey("qwen3moe.expert_used_count"), nil, "qwen3moe.expert_used_count is missing"},
		{"zero experts", setKey("qwen3moe.expert_count", func(w *gguf.Writer) { w.SetUint32("qwen3moe.expert_count", 0) }), nil, "out of range"},
		{"unknown gating", setKey("qwen3moe.expert_count", func(w *gguf.Writer) {
			w.SetUint32("qwen3moe.expert_count", 8)
			w.SetUint32("qwen3moe.expert_gating_func", 9)
		}), nil, "expert_gating_func = 9 is not supported"},
		{"missing router", nil, dropTensor("blk.1.ffn_gate_inp.weight"), `tensor "blk.1.ffn_gate_inp.weight" is missing`},
		{"missing experts", nil, dropTensor("blk.0.ffn_down_exps.weight"), `tensor "blk.0.ffn_down_exps.weight" is missing`},
		{"experts stored 2-D", nil, reshape("blk.0.ffn_up_exps.weight", 256, 128*8), `"blk.0.ffn_up_exps.weight" has shape [256 1024], want [256 128 8] (columns, rows, experts)`},
		{"expert count of the tensor", nil, reshape("blk.0.ffn_gate_exps.weight", 256, 64, 16), `"blk.0.ffn_gate_exps.weight" has shape [256 64 16], want [256 128 8]`},
		{"wrong expert width", setKey("qwen3moe.expert_feed_forward_length", func(w *gguf.Writer) { w.SetUint32("qwen3moe.expert_feed_forward_length", 256) }), nil,
			`"blk.0.ffn_gate_exps.weight" has shape [256 128 8], want [256 256 8]`},
		{"a shared expert qwen3moe has not", nil, func(w *gguf.Writer, ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.ffn_norm.weight" {
				if err := w.AddTensorF32("blk.0.ffn_up_shexp.weight", quant.F32, []uint64{256, 4}, make([]float32, 1024)); err != nil {
					t.Fatal(err)
				}
			}
			return false
		}, "qwen3moe has no shared expert"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := model.Load(open(t, edited(t, data, tc.key, tc.tensor)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A dense architecture with expert keys is refused, naming the one that has experts.
func TestDenseArchitectureWithExpertsIsRefused(t *testing.T) {
	data := tinyMoE(t, quant.Q8_0)
	_, err := model.Load(open(t, edited(t, data, func(w *gguf.Writer, k string) bool {
		if k == "general.architecture" {
			w.SetString(k, "qwen3")
			return true
		}
		if v, ok := strings.CutPrefix(k, "qwen3moe."); ok {
			f := open(t, data)
			val, _ := f.Get(k)
			w.SetValue("qwen3."+v, val)
			return true
		}
		return false
	}, nil)))
	if err == nil || !strings.Contains(err.Error(), "mixture-of-experts layers are supported for qwen2moe and qwen3moe only") {
		t.Fatalf("err %v", err)
	}
}

func TestQwen2MoELoadsTheSharedExpertAndKeepsWeightsUnnormalised(t *testing.T) {
	path := modeltest.TinySynth(t, "", "qwen2moe", quant.Q8_0, 3)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(open(t, data))
	if err != nil {
		t.Fatal(err)
	}
	if p := m.Hyper.MoE; p.NormWeights || p.SharedFFN != 256 || p.Experts != 8 || p.Used != 2 {
		t.Fatalf("routing %+v: want llama.cpp's qwen2moe (no renormalisation) and the shared width 256", p)
	}
	sh := m.Layers[1].MoE.Shared
	if sh == nil || sh.Up.Rows != 256 || sh.Down.Cols != 256 || sh.Gating.Rows != 1 || sh.Gating.Cols != 256 || !m.Layers[1].QBias.Present() {
		t.Fatalf("shared expert %+v, q bias %v", sh, m.Layers[1].QBias.Present())
	}
	if _, err := model.Load(open(t, edited(t, data, nil, func(w *gguf.Writer, ti *gguf.TensorInfo) bool {
		return ti.Name == "blk.1.ffn_gate_inp_shexp.weight"
	}))); err == nil || !strings.Contains(err.Error(), `"blk.1.ffn_gate_inp_shexp.weight" is missing`) {
		t.Fatalf("missing shared gate: %v", err)
	}
	if _, err := model.Load(open(t, edited(t, data, nil, func(w *gguf.Writer, ti *gguf.TensorInfo) bool {
		return strings.Contains(ti.Name, "shexp")
	}))); err == nil || !strings.Contains(err.Error(), "shared expert") {
		t.Fatalf("no shared expert at all: %v", err)
	}
}
