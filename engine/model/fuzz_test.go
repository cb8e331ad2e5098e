package model_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/model/synth"
	"github.com/vkllm/vkllm/engine/quant"
)

// fuzzArchs are the architectures the hyperparameter fuzzer starts from: one tiny valid model each
// (llama plain, qwen2 with biases, qwen3 with per-head norms and rope factors, and the mixtures
// of experts qwen3moe and qwen2moe, the latter with a shared expert).
var fuzzArchs = []string{"llama", "qwen2", "qwen3", "qwen3moe", "qwen2moe"}

// hyperKeys are the {arch}.* keys model.Load reads, present in the tiny models or not, so the
// fuzzer can add the optional ones as well as change the ones there.
var hyperKeys = []string{
	"embedding_length", "block_count", "attention.head_count", "attention.head_count_kv",
	"feed_forward_length", "context_length", "attention.key_length", "attention.value_length",
	"rope.dimension_count", "attention.layer_norm_rms_epsilon", "rope.freq_base", "rope.scaling.type",
	"rope.scaling.factor", "rope.scale_linear", "expert_count", "expert_used_count",
	"expert_feed_forward_length", "expert_shared_feed_forward_length", "expert_group_count",
	"expert_gating_func", "expert_weights_norm", "expert_weights_scale",
}

// tinySpec is a model small enough to rewrite on every fuzz execution.
func tinySpec(arch string) modeltest.Spec {
	return modeltest.Spec{Arch: arch, Type: quant.F32, Dim: 32, Layers: 2, Heads: 4, HeadsKV: 2, FFN: 48,
		Vocab: 24, Context: 64, Seed: 3, RopeFactors: arch == "qwen3"}
}

// tinyModel is the GGUF of the fuzzer's starting model of arch: modeltest's for the dense
// architectures, synth's (four experts, two used) for the mixtures of experts.
func tinyModel(tb testing.TB, arch string) []byte {
	tb.Helper()
	if arch != "qwen3moe" && arch != "qwen2moe" {
		data, err := modeltest.Bytes(tinySpec(arch))
		if err != nil {
			tb.Fatal(err)
		}
		return data
	}
	vw := gguf.NewWriter()
	vw.SetString("tokenizer.ggml.model", "llama")
	tokens := make([]string, 24)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("t%d", i)
	}
	vw.SetStrings("tokenizer.ggml.tokens", tokens)
	vdata, err := vw.Bytes()
	if err != nil {
		tb.Fatal(err)
	}
	vocab, err := gguf.OpenBytes("vocab.gguf", vdata)
	if err != nil {
		tb.Fatal(err)
	}
	shape := synth.Shape{Dim: 32, Layers: 2, Heads: 4, HeadsKV: 2, FFN: 48, Ctx: 64, Experts: 4, ExpertsUsed: 2, ExpertFFN: 16}
	if arch == "qwen2moe" {
		shape.SharedFFN = 32
	}
	path := filepath.Join(tb.TempDir(), arch+".gguf")
	if _, err := synth.Write(context.Background(), path, synth.Options{Arch: arch, Shape: shape, Type: quant.F32, Vocab: vocab, Seed: 3}); err != nil {
		tb.Fatalf("write the tiny %s: %v", arch, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// hostileValue builds a metadata value of the fuzzed type from the fuzzed number and text. Arrays
// have up to 4095 elements, so one value never asks the test itself for much memory.
func hostileValue(typ uint8, num uint64, text string, count uint16) gguf.Value {
	n := int(count % 4096)
	var x any
	switch gguf.ValueType(typ % 13) {
	case gguf.TypeUint8:
		x = uint8(num)
	case gguf.TypeInt8:
		x = int8(num)
	case gguf.TypeUint16:
		x = uint16(num)
	case gguf.TypeInt16:
		x = int16(num)
	case gguf.TypeUint32:
		x = uint32(num)
	case gguf.TypeInt32:
		x = int32(num)
	case gguf.TypeFloat32:
		x = math.Float32frombits(uint32(num))
	case gguf.TypeBool:
		x = num&1 == 1
	case gguf.TypeString:
		x = text
	case gguf.TypeUint64:
		x = num
	case gguf.TypeInt64:
		x = int64(num)
	case gguf.TypeFloat64:
		x = math.Float64frombits(num)
	default: // an array: of numbers, or of the text's words
		if num&1 == 0 {
			a := make([]uint32, n)
			for i := range a {
				a[i] = uint32(num>>1) + uint32(i)
			}
			x = a
		} else {
			words := strings.Fields(text)
			a := make([]string, 0, n)
			for i := 0; i < n && len(words) > 0; i++ {
				a = append(a, words[i%len(words)])
			}
			x = a
		}
	}
	v, err := gguf.ValueOf(x)
	if err != nil {
		panic(fmt.Sprintf("hostileValue built a %T the writer refuses: %v", x, err)) // a bug in this test
	}
	return v
}

// mutateModel rewrites the tiny model of arch with one metadata key changed (or deleted, op 13)
// and one tensor reshaped, retyped or dropped; every tensor keeps data that matches its
// dimensions, so the file itself is well formed and only its meaning is hostile.
func mutateModel(t *testing.T, base *gguf.File, key uint8, typ uint8, num uint64, text string, count uint16,
	tensorOp uint8, d0, d1 uint32) []byte {
	t.Helper()
	arch := base.Architecture()
	keys := make([]string, 0, len(base.KV)+len(hyperKeys))
	for _, kv := range base.KV {
		keys = append(keys, kv.Key)
	}
	for _, k := range hyperKeys {
		keys = append(keys, arch+"."+k)
	}
	target := keys[int(key)%len(keys)]
	w := gguf.NewWriter()
	for _, kv := range base.KV {
		w.SetValue(kv.Key, kv.Value)
	}
	if typ%14 == 13 {
		w.Delete(target)
	} else {
		w.SetValue(target, hostileValue(typ, num, text, count))
	}
	victim := int(tensorOp>>2) % len(base.Tensors)
	for i, ti := range base.Tensors {
		if i != victim {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
			continue
		}
		switch tensorOp % 4 {
		case 0: // unchanged
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
		case 1: // other dimensions, at most 64 Ki elements, with data to match
			a, b := uint64(d0%4096), uint64(d1%64)
			if a == 0 {
				a = 1
			}
			dims := []uint64{a}
			if b > 0 {
				dims = append(dims, b)
			}
			if d1>>31 == 1 { // a third dimension of 2
				dims = append(dims, 2)
			}
			n := uint64(1)
			for _, d := range dims {
				n *= d
			}
			if err := w.AddTensor(ti.Name, quant.F32, dims, make([]byte, 4*n)); err != nil {
				t.Fatal(err)
			}
		case 2: // another type with the same dimensions
			if err := w.AddTensorF32(ti.Name, quant.F16, ti.Dims, make([]float32, ti.Elements())); err != nil {
				t.Fatal(err)
			}
		case 3: // dropped
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// maxLoadAlloc is the most model.Load may allocate for a file of n bytes: its vectors are copies
// of tensors in the file (f32, so at most twice an f16 tensor's bytes) plus bookkeeping that must
// not grow with a hyperparameter the file does not back with tensors.
func maxLoadAlloc(n int) uint64 { return 8<<20 + 4*uint64(n) }

// FuzzLoadHyperparameters feeds model.Load valid tiny GGUF files whose hyperparameters, metadata
// types and array lengths and tensor shapes are hostile: it must return an error or a model that
// is consistent with its file, never panic, and never allocate more than the file can justify.
func FuzzLoadHyperparameters(f *testing.F) {
	// (arch, key, type, number, text, count, tensor op, d0, d1)
	f.Add(uint8(0), uint8(2), uint8(4), uint64(1<<24), "", uint16(0), uint8(0), uint32(0), uint32(0))                    // block_count 1<<24
	f.Add(uint8(0), uint8(2), uint8(10), uint64(1<<63), "", uint16(0), uint8(0), uint32(0), uint32(0))                   // uint64 block_count
	f.Add(uint8(1), uint8(3), uint8(5), uint64(math.MaxUint32), "", uint16(0), uint8(5), uint32(31), uint32(5))          // negative head_count
	f.Add(uint8(2), uint8(6), uint8(9), uint64(7), "a b c", uint16(4000), uint8(9), uint32(32), uint32(0))               // array as a count
	f.Add(uint8(0), uint8(0), uint8(8), uint64(0), "gpt-oss", uint16(0), uint8(3), uint32(0), uint32(0))                 // architecture renamed
	f.Add(uint8(1), uint8(40), uint8(8), uint64(0), "yarn", uint16(0), uint8(2), uint32(0), uint32(0))                   // rope scaling type
	f.Add(uint8(2), uint8(41), uint8(12), uint64(0x7ff8000000000001), "", uint16(0), uint8(1), uint32(4095), uint32(63)) // NaN factor
	f.Add(uint8(0), uint8(33), uint8(4), uint64(1<<24), "", uint16(0), uint8(0), uint32(0), uint32(0))                   // key_length 1<<24
	f.Add(uint8(2), uint8(13), uint8(13), uint64(0), "", uint16(0), uint8(1), uint32(16), uint32(0))                     // a key deleted
	f.Add(uint8(3), uint8(0), uint8(13), uint64(0), "", uint16(0), uint8(0), uint32(0), uint32(0))                       // qwen3moe as written
	f.Add(uint8(4), uint8(0), uint8(13), uint64(0), "", uint16(0), uint8(0), uint32(0), uint32(0))                       // qwen2moe as written
	f.Add(uint8(3), uint8(44), uint8(4), uint64(1<<20), "", uint16(0), uint8(0), uint32(0), uint32(0))                   // a key set to 1<<20
	f.Add(uint8(4), uint8(45), uint8(4), uint64(9), "", uint16(0), uint8(0), uint32(0), uint32(0))                       // a key set to 9

	bases := make([]*gguf.File, len(fuzzArchs))
	for i, arch := range fuzzArchs {
		var err error
		if bases[i], err = gguf.OpenBytes(arch+".gguf", tinyModel(f, arch)); err != nil {
			f.Fatal(err)
		}
		if _, err := model.Load(bases[i]); err != nil {
			f.Fatalf("the unmutated %s model does not load: %v", arch, err)
		}
	}
	f.Fuzz(func(t *testing.T, arch, key, typ uint8, num uint64, text string, count uint16, tensorOp uint8, d0, d1 uint32) {
		data := mutateModel(t, bases[int(arch)%len(bases)], key, typ, num, text, count, tensorOp, d0, d1)
		file, err := gguf.OpenBytes("fuzz.gguf", data)
		if err != nil {
			t.Fatalf("the writer's file does not open: %v", err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := model.Load(file)
		runtime.ReadMemStats(&after)
		if got, limit := after.TotalAlloc-before.TotalAlloc, maxLoadAlloc(len(data)); got > limit {
			t.Fatalf("model.Load allocated %d bytes for a %d-byte file (limit %d)", got, len(data), limit)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.gguf") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		checkLoadedModel(t, m)
	})
}

// checkLoadedModel asserts what a model that loaded promises its forward passes.
func checkLoadedModel(t *testing.T, m *model.Model) {
	t.Helper()
	h := m.Hyper
	counts := map[string]int{"dim": h.Dim, "layers": h.Layers, "heads": h.Heads, "heads_kv": h.HeadsKV,
		"head_dim": h.HeadDim, "value_dim": h.ValueDim, "context": h.ContextLength, "vocab": h.VocabSize}
	if h.MoE.Experts == 0 {
		counts["ffn"] = h.FFN // a mixture of experts may leave feed_forward_length out
	} else {
		counts["expert_ffn"], counts["experts_used"] = h.MoE.FFN, h.MoE.Used
	}
	for name, v := range counts {
		if v <= 0 || v > 1<<24 {
			t.Fatalf("loaded with %s = %d", name, v)
		}
	}
	if h.Heads%h.HeadsKV != 0 || h.Rope.Dims > h.HeadDim || h.Rope.Dims%2 != 0 || !(h.NormEps > 0) || !(h.Rope.FreqBase > 0) ||
		!(h.Rope.FreqScale > 0) || math.IsInf(float64(h.Rope.FreqBase), 0) || math.IsInf(float64(h.Rope.FreqScale), 0) {
		t.Fatalf("loaded with inconsistent hyperparameters %+v", h)
	}
	if len(m.Layers) != h.Layers {
		t.Fatalf("%d layers for block_count %d", len(m.Layers), h.Layers)
	}
	matrices := []model.Matrix{m.TokenEmbd, m.Output}
	for i := range m.Layers {
		l := &m.Layers[i]
		matrices = append(matrices, l.Matrices()...)
		if mo := l.MoE; mo != nil {
			p := h.MoE
			if p.Used < 1 || p.Used > p.Experts || mo.Gate.Count != p.Experts || mo.Up.Count != p.Experts ||
				mo.Down.Count != p.Experts || mo.Router.Rows != p.Experts || !(p.WeightsScale > 0) {
				t.Fatalf("layer %d: %d experts, %d used, tensors of %d/%d/%d experts, router %d rows, scale %g",
					i, p.Experts, p.Used, mo.Gate.Count, mo.Up.Count, mo.Down.Count, mo.Router.Rows, p.WeightsScale)
			}
		}
	}
	for _, mx := range matrices {
		if mx.Rows <= 0 || mx.Cols <= 0 || len(mx.Data) != mx.Rows*mx.RowBytes {
			t.Fatalf("matrix %s: %d rows of %d bytes in %d bytes", mx.Name, mx.Rows, mx.RowBytes, len(mx.Data))
		}
	}
	if m.Output.Rows != h.VocabSize || m.TokenEmbd.Cols != h.Dim {
		t.Fatalf("output %d rows for vocab %d, embedding %d cols for dim %d", m.Output.Rows, h.VocabSize, m.TokenEmbd.Cols, h.Dim)
	}
	if h.Rope.Factors != nil && len(h.Rope.Factors) != h.Rope.Dims/2 {
		t.Fatalf("%d rope factors for %d rotated dims", len(h.Rope.Factors), h.Rope.Dims)
	}
}

// TestHugeBlockCountIsRefusedWithoutAllocatingForIt holds the cap the fuzzer found missing: a
// block_count the file has no tensors for is refused before anything is sized by it.
func TestHugeBlockCountIsRefusedWithoutAllocatingForIt(t *testing.T) {
	for _, n := range []uint32{1000, 1 << 20, 1 << 24} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := tinySpec("llama")
			data := rewrite(t, s, func(w *gguf.Writer, k string, v gguf.Value) bool {
				if k == "llama.block_count" {
					w.SetUint32(k, n)
					return true
				}
				return false
			}, "")
			file := open(t, data)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := model.Load(file)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "block_count") {
				t.Fatalf("block_count %d: err %v, want a refusal naming block_count", n, err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > maxLoadAlloc(len(data)) {
				t.Fatalf("block_count %d: allocated %d bytes before refusing a %d-byte file", n, got, len(data))
			}
		})
	}
}
