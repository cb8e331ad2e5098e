package gguf

import (
	"bytes"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// fuzzSeeds are small valid files; testdata/fuzz/FuzzOpenBytes holds a few more (broken ones).
func fuzzSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	w := NewWriter()
	w.SetString(KeyArchitecture, "llama")
	w.SetUint32("llama.context_length", 128)
	w.SetFloat32("llama.rope.freq_base", 10000)
	w.SetStrings("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "▁a"})
	w.SetFloat32s("tokenizer.ggml.scores", []float32{0, 0, -1})
	w.SetInt32s("tokenizer.ggml.token_type", []int32{2, 3, 1})
	w.SetBool("tokenizer.ggml.add_bos_token", true)
	w.AddTensor("token_embd.weight", quant.F32, []uint64{4, 3}, make([]byte, 48))
	w.AddTensor("blk.0.attn_q.weight", quant.Q8_0, []uint64{32, 2}, make([]byte, 68))
	seeds = append(seeds, encode(t, w))

	w = NewWriter()
	w.SetUint32(KeyAlignment, 8)
	for _, x := range []any{uint8(1), int8(-1), uint16(2), int16(-2), int64(-3), uint64(3), float64(0.5),
		[]bool{true}, []uint64{9}, []Value{mustValueTB(t, []int8{1}), mustValueTB(t, []string{"x"})}} {
		w.Set(seedKey(x), x)
	}
	w.AddTensor("h", quant.F16, []uint64{3}, make([]byte, 6))
	seeds = append(seeds, encode(t, w))
	return seeds
}

// seedKey names a seed key after its value type.
func seedKey(x any) string {
	v, _ := ValueOf(x)
	return "k." + v.Type().String() + "." + v.ElemType().String()
}

func mustValueTB(t testing.TB, x any) Value {
	v, err := ValueOf(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func encode(t testing.TB, w *Writer) []byte {
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rewrite writes an opened file back out through the Writer.
func rewrite(t testing.TB, f *File) []byte {
	w := NewWriter()
	for _, kv := range f.KV {
		w.SetValue(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatalf("a tensor the reader accepted is refused by the writer: %v", err)
		}
	}
	return encode(t, w)
}

func FuzzOpenBytes(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkHeaderOnly(t, data)
		file, err := OpenBytes("fuzz.gguf", data)
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error %v is a %T, want *FormatError", err, err)
			}
			return
		}
		for _, ti := range file.Tensors {
			if int64(len(ti.Data)) != ti.Size || ti.Offset+uint64(ti.Size) > uint64(len(data)) {
				t.Fatalf("tensor %s: Size %d, len(Data) %d, offset %d in %d bytes", ti.Name, ti.Size, len(ti.Data), ti.Offset, len(data))
			}
		}
		for _, kv := range file.KV {
			if _, ok := file.Get(kv.Key); !ok {
				t.Fatalf("key %q listed but not found", kv.Key)
			}
			_ = kv.Value.String()
		}
		_ = file.Summary()
		// Writing what was read and reading it again must be stable.
		once := rewrite(t, file)
		again, err := OpenBytes("rewritten.gguf", once)
		if err != nil {
			t.Fatalf("the writer's output of an accepted file does not open: %v", err)
		}
		if twice := rewrite(t, again); !bytes.Equal(once, twice) {
			t.Fatalf("rewriting is not stable: %d then %d bytes", len(once), len(twice))
		}
	})
}

// checkHeaderOnly parses data as OpenHeader does: a refusal is a *FormatError; an accepted file
// has every tensor either whole in the data or Absent without data, and MissingBytes is what the
// absent tensors lack (0 exactly when none is absent), never more than their sizes.
func checkHeaderOnly(t *testing.T, data []byte) {
	h, err := parse("fuzz.gguf", data, 0, true)
	if err != nil {
		if _, ok := err.(*FormatError); !ok {
			t.Fatalf("header-only parse error %v is a %T, want *FormatError", err, err)
		}
		return
	}
	var absent int64
	for _, ti := range h.Tensors {
		switch {
		case ti.Absent && ti.Data != nil, !ti.Absent && int64(len(ti.Data)) != ti.Size:
			t.Fatalf("tensor %s: absent %v with %d of %d bytes", ti.Name, ti.Absent, len(ti.Data), ti.Size)
		case ti.Absent:
			absent += ti.Size
		}
	}
	if (h.MissingBytes == 0) != (absent == 0) || h.MissingBytes > absent || h.MissingBytes < 0 {
		t.Fatalf("MissingBytes %d for %d bytes of absent tensors", h.MissingBytes, absent)
	}
}
