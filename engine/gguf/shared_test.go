package gguf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/sharedtest"
)

func TestSharedModelsOpenWithArchitectureAndTensorData(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(sharedtest.Path(t, "models"), "*.gguf"))
	if len(paths) == 0 {
		t.Skip("skipping: no *.gguf in the shared models dir")
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Architecture() != "llama" {
				t.Errorf("general.architecture = %q, want llama", f.Architecture())
			}
			if len(f.Tensors) == 0 {
				t.Fatal("no tensors")
			}
			tok, ok := f.Tensor("token_embd.weight")
			if !ok {
				t.Fatal("token_embd.weight missing")
			}
			vocab, ok := f.Strings("tokenizer.ggml.tokens")
			if !ok || len(vocab) == 0 {
				t.Fatal("tokenizer.ggml.tokens missing")
			}
			if tok.Dims[1] != uint64(len(vocab)) {
				t.Errorf("token_embd rows %d, vocab %d", tok.Dims[1], len(vocab))
			}
			embd, ok := f.Uint("llama.embedding_length")
			if !ok || tok.Dims[0] != embd {
				t.Errorf("token_embd row length %d, llama.embedding_length %d (ok %v)", tok.Dims[0], embd, ok)
			}
			var sum int64
			for _, ti := range f.Tensors {
				if int64(len(ti.Data)) != ti.Size {
					t.Errorf("%s: len(Data) %d != Size %d", ti.Name, len(ti.Data), ti.Size)
				}
				if ti.Offset%uint64(f.Alignment) != 0 {
					t.Errorf("%s: offset %d not aligned to %d", ti.Name, ti.Offset, f.Alignment)
				}
				sum += ti.Size
			}
			if sum > f.Size-f.DataOffset {
				t.Errorf("tensor bytes %d exceed the data section %d", sum, f.Size-f.DataOffset)
			}
			if f.ParamCount() <= 0 {
				t.Errorf("ParamCount %d", f.ParamCount())
			}
			t.Log(f.Summary())
		})
	}
}

func TestSharedVocabFilesOpenWithTokenArrays(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(sharedtest.Path(t, "reference/tokenizer"), "*.gguf"))
	if len(paths) == 0 {
		t.Skip("skipping: no vocab *.gguf in the shared tokenizer dir")
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tokens, ok := f.Strings("tokenizer.ggml.tokens")
			if !ok || len(tokens) < 256 {
				t.Fatalf("tokenizer.ggml.tokens: %d tokens (ok %v), want at least 256", len(tokens), ok)
			}
			if model, ok := f.String("tokenizer.ggml.model"); !ok || model == "" {
				t.Errorf("tokenizer.ggml.model missing")
			}
			if types, ok := f.Int32s("tokenizer.ggml.token_type"); ok && len(types) != len(tokens) {
				t.Errorf("token_type has %d entries for %d tokens", len(types), len(tokens))
			}
		})
	}
}

func TestEmbeddedModelBytesOpenLikeTheFile(t *testing.T) {
	p := filepath.Join(sharedtest.Path(t, "models"), "stories260K.gguf")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	fb, err := OpenBytes("stories260K.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	ff, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ff.Close()
	if len(fb.Tensors) != len(ff.Tensors) || len(fb.KV) != len(ff.KV) {
		t.Fatalf("bytes: %d tensors %d kv; file: %d tensors %d kv", len(fb.Tensors), len(fb.KV), len(ff.Tensors), len(ff.KV))
	}
	for i := range fb.Tensors {
		a, b := fb.Tensors[i], ff.Tensors[i]
		if a.Name != b.Name || a.Offset != b.Offset || string(a.Data) != string(b.Data) {
			t.Errorf("tensor %d differs: %s@%d vs %s@%d", i, a.Name, a.Offset, b.Name, b.Offset)
		}
	}
}

func TestEmbeddedDefaultModelOpensFromBytes(t *testing.T) {
	f, err := OpenBytes(embedded.Name, embedded.ModelGGUF)
	if err != nil {
		t.Fatal(err)
	}
	if f.Architecture() != "llama" || len(f.Tensors) == 0 {
		t.Fatalf("architecture %q, %d tensors", f.Architecture(), len(f.Tensors))
	}
	if n, ok := f.Uint("llama.block_count"); !ok || n != 5 {
		t.Errorf("llama.block_count = %d, %v; want 5 (stories260K)", n, ok)
	}
	if tokens, _ := f.Strings("tokenizer.ggml.tokens"); len(tokens) != 512 {
		t.Errorf("%d tokens, want 512", len(tokens))
	}
}
