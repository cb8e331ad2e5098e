package model_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

func open(t *testing.T, data []byte) *gguf.File {
	t.Helper()
	f, err := gguf.OpenBytes("test.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func build(t *testing.T, s modeltest.Spec) []byte {
	t.Helper()
	data, err := modeltest.Bytes(s)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestHyperparametersComeFromArchitectureKeys(t *testing.T) {
	cases := []struct {
		arch string
		rope model.RopeKind
	}{
		{"llama", model.RopeNormal},
		{"qwen2", model.RopeNeoX},
		{"qwen3", model.RopeNeoX},
	}
	for _, tc := range cases {
		t.Run(tc.arch, func(t *testing.T) {
			m, err := model.Load(open(t, build(t, modeltest.Small(tc.arch, quant.Q8_0, 1))))
			if err != nil {
				t.Fatal(err)
			}
			h := m.Hyper
			want := model.Hyperparameters{Arch: tc.arch, Dim: 256, Layers: 2, Heads: 4, HeadsKV: 2, HeadDim: 64, ValueDim: 64,
				FFN: 256, ContextLength: 256, VocabSize: 320, NormEps: 1e-5}
			got := h
			got.Rope = model.Rope{}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("hyperparameters %+v, want %+v", got, want)
			}
			if h.Rope.Kind != tc.rope || h.Rope.Dims != 64 || h.Rope.FreqBase != 10000 || h.Rope.FreqScale != 1 {
				t.Fatalf("rope %+v", h.Rope)
			}
			if len(m.Layers) != 2 || m.Output.Name != "output.weight" || m.Tied {
				t.Fatalf("layers %d output %q tied %v", len(m.Layers), m.Output.Name, m.Tied)
			}
			l := m.Layers[1]
			if l.Q.Rows != 256 || l.K.Rows != 128 || l.Down.Cols != 256 || l.Q.Type != quant.Q8_0 {
				t.Fatalf("layer shapes q %dx%d k %d down cols %d", l.Q.Rows, l.Q.Cols, l.K.Rows, l.Down.Cols)
			}
			if got := l.QBias.Present(); got != (tc.arch == "qwen2") {
				t.Fatalf("q bias present = %v", got)
			}
			if got := l.QNorm.Present(); got != (tc.arch == "qwen3") {
				t.Fatalf("q norm present = %v", got)
			}
		})
	}
}

func TestMissingOutputTensorTiesTheHeadToTheEmbedding(t *testing.T) {
	s := modeltest.Small("llama", quant.F16, 1)
	s.Tied = true
	m, err := model.Load(open(t, build(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Tied || m.Output.Name != "token_embd.weight" {
		t.Fatalf("tied %v output %q", m.Tied, m.Output.Name)
	}
}

// rewrite copies every key and tensor of a spec's file into a writer, letting edit change them.
func rewrite(t *testing.T, s modeltest.Spec, edit func(w *gguf.Writer, key string, v gguf.Value) bool, dropTensor string) []byte {
	t.Helper()
	f := open(t, build(t, s))
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if edit == nil || !edit(w, kv.Key, kv.Value) {
			w.SetValue(kv.Key, kv.Value)
		}
	}
	for _, ti := range f.Tensors {
		if ti.Name == dropTensor {
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

func TestBadModelsAreRefusedWithTheCause(t *testing.T) {
	s := modeltest.Small("llama", quant.F32, 1)
	set := func(key string, apply func(w *gguf.Writer)) func(w *gguf.Writer, k string, v gguf.Value) bool {
		return func(w *gguf.Writer, k string, v gguf.Value) bool {
			if k == key {
				apply(w)
				return true
			}
			return false
		}
	}
	drop := func(key string) func(w *gguf.Writer, k string, v gguf.Value) bool {
		return func(w *gguf.Writer, k string, v gguf.Value) bool { return k == key }
	}
	cases := []struct {
		name  string
		edit  func(w *gguf.Writer, k string, v gguf.Value) bool
		drop  string
		extra func(w *gguf.Writer)
		want  string
	}{
		{"unknown architecture", set("general.architecture", func(w *gguf.Writer) { w.SetString("general.architecture", "mamba") }), "", nil, `architecture "mamba" is not supported`},
		{"no architecture", drop("general.architecture"), "", nil, "no general.architecture"},
		{"missing block count", drop("llama.block_count"), "", nil, "llama.block_count is missing"},
		{"zero heads", set("llama.attention.head_count", func(w *gguf.Writer) { w.SetUint32("llama.attention.head_count", 0) }), "", nil, "out of range"},
		{"heads not a multiple of kv heads", set("llama.attention.head_count_kv", func(w *gguf.Writer) { w.SetUint32("llama.attention.head_count_kv", 3) }), "", nil, "not a multiple of head_count_kv 3"},
		{"missing tensor", nil, "blk.1.ffn_up.weight", nil, `tensor "blk.1.ffn_up.weight" is missing`},
		{"wrong ffn size", set("llama.feed_forward_length", func(w *gguf.Writer) { w.SetUint32("llama.feed_forward_length", 512) }), "", nil, `"blk.0.ffn_gate.weight" has shape [256 256], want [256 512]`},
		{"yarn scaling", nil, "", func(w *gguf.Writer) { w.SetString("llama.rope.scaling.type", "yarn") }, `rope scaling "yarn" is not supported`},
		{"mixture of experts", nil, "", func(w *gguf.Writer) { w.SetUint32("llama.expert_count", 8) }, "mixture-of-experts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edit := tc.edit
			if tc.extra != nil {
				added := false
				edit = func(w *gguf.Writer, k string, v gguf.Value) bool {
					if !added {
						tc.extra(w)
						added = true
					}
					return false
				}
			}
			_, err := model.Load(open(t, rewrite(t, s, edit, tc.drop)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLinearRopeScalingSetsTheFrequencyScale(t *testing.T) {
	s := modeltest.Small("llama", quant.F32, 1)
	data := rewrite(t, s, func(w *gguf.Writer, k string, v gguf.Value) bool {
		if k == "llama.rope.freq_base" {
			w.SetFloat32("llama.rope.freq_base", 500000)
			w.SetString("llama.rope.scaling.type", "linear")
			w.SetFloat32("llama.rope.scaling.factor", 4)
			return true
		}
		return false
	}, "")
	m, err := model.Load(open(t, data))
	if err != nil {
		t.Fatal(err)
	}
	if r := m.Hyper.Rope; r.FreqScale != 0.25 || r.FreqBase != 500000 || r.Scaling != "linear" {
		t.Fatalf("rope %+v", r)
	}
}

func TestSharedModelsLoad(t *testing.T) {
	f, err := gguf.Open("../../../shared/models/stories260K.gguf")
	if err != nil {
		t.Skipf("skipping: shared models not available: %v", err)
	}
	defer f.Close()
	m, err := model.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	h := m.Hyper
	if h.Dim != 64 || h.Layers != 5 || h.Heads != 8 || h.HeadsKV != 4 || h.VocabSize != 512 || h.Rope.Kind != model.RopeNormal {
		t.Fatalf("stories260K hyperparameters %+v", h)
	}
}
