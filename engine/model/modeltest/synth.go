package modeltest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/synth"
	"github.com/vkllm/vkllm/engine/quant"
)

// TinySynth writes `vkllm synth`'s tiny preset of arch (llama, qwen2, qwen3, qwen3moe, qwen2moe,
// qwen35, qwen35moe) in typ with the embedded model's vocabulary into dir (the test's temporary
// folder when dir is "") and returns its path. The same arguments write the same bytes.
func TinySynth(tb testing.TB, dir, arch string, typ quant.Type, seed uint64) string {
	tb.Helper()
	return tinySynth(tb, dir, arch, synth.Uniform(typ), typ.String(), seed)
}

// TinySynthMix is TinySynth with each role's type from mix (synth.Mixes, or synth.Uniform),
// the file named after the mix.
func TinySynthMix(tb testing.TB, dir, arch string, mix synth.Mix, seed uint64) string {
	tb.Helper()
	return tinySynth(tb, dir, arch, mix, mix.Name, seed)
}

// tinySynth writes the tiny preset of arch in mix as dir/<arch>-<name>-<seed>.gguf.
func tinySynth(tb testing.TB, dir, arch string, mix synth.Mix, name string, seed uint64) string {
	tb.Helper()
	vocab, err := gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	if err != nil {
		tb.Fatalf("open the embedded vocabulary: %v", err)
	}
	defer vocab.Close()
	shape, err := synth.Preset(arch, "tiny")
	if err != nil {
		tb.Fatal(err)
	}
	if dir == "" {
		dir = tb.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%d.gguf", arch, name, seed))
	if _, err := synth.Write(context.Background(), path, synth.Options{Arch: arch, Shape: shape, Mix: &mix, Vocab: vocab, Seed: seed}); err != nil {
		tb.Fatalf("write the tiny %s in %s: %v", arch, mix.Name, err)
	}
	return path
}

// Load opens the GGUF at path and loads its model, the file closed when the test ends.
func Load(tb testing.TB, path string) *model.Model {
	tb.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	return loadFile(tb, f)
}

// LoadBytes is Load for a GGUF held in memory under name.
func LoadBytes(tb testing.TB, name string, data []byte) *model.Model {
	tb.Helper()
	f, err := gguf.OpenBytes(name, data)
	if err != nil {
		tb.Fatal(err)
	}
	return loadFile(tb, f)
}

// loadFile loads f's model, closing f when the test ends.
func loadFile(tb testing.TB, f *gguf.File) *model.Model {
	tb.Helper()
	tb.Cleanup(func() { f.Close() })
	m, err := model.Load(f)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}
