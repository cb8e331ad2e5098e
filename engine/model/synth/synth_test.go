package synth

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

func embeddedVocab(t *testing.T) *gguf.File {
	t.Helper()
	f, err := gguf.OpenBytes(embedded.Name, embedded.ModelGGUF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFallbackTypeFollowsLlamaQuantize(t *testing.T) {
	cases := []struct {
		want quant.Type
		cols int
		as   quant.Type
	}{
		{quant.IQ2_XXS, 256, quant.IQ2_XXS},
		{quant.IQ2_XXS, 128, quant.IQ4_NL},
		{quant.IQ2_XS, 768, quant.IQ2_XS},
		{quant.IQ3_S, 96, quant.IQ4_NL},
		{quant.IQ4_XS, 128, quant.IQ4_NL},
		{quant.Q2_K, 128, quant.Q4_0},
		{quant.Q3_K, 128, quant.Q4_0},
		{quant.Q4_K, 128, quant.Q5_0},
		{quant.Q5_K, 128, quant.Q5_1},
		{quant.Q6_K, 128, quant.Q8_0},
		{quant.Q4_K, 80, quant.F16}, // not even the fallback's 32 divides it
		{quant.IQ4_NL, 48, quant.F16},
		{quant.MXFP4, 64, quant.MXFP4},
		{quant.Q8_0, 32, quant.Q8_0},
	}
	for _, tc := range cases {
		if got := FallbackType(tc.want, tc.cols); got != tc.as {
			t.Errorf("%s for rows of %d: %s, want %s", tc.want, tc.cols, got, tc.as)
		}
	}
}

// The tiny qwen3moe's expert down projections have rows of 128: in a super-block type they are
// written in the fallback, reported, and the file says so.
func TestWriteReportsAndWritesFallbacks(t *testing.T) {
	shape, err := Preset("qwen3moe", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	res, err := Write(context.Background(), path, Options{Arch: "qwen3moe", Shape: shape, Type: quant.IQ2_XXS, Vocab: embeddedVocab(t), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fallbacks) != shape.Layers {
		t.Fatalf("fallbacks %v, want the %d down projections", res.Fallbacks, shape.Layers)
	}
	for _, fb := range res.Fallbacks {
		if !strings.HasSuffix(fb.Tensor, "ffn_down_exps.weight") || fb.As != quant.IQ4_NL || fb.Cols != 128 ||
			!strings.Contains(fb.String(), "not a multiple of IQ2_XXS's block of 256, written as IQ4_NL") {
			t.Fatalf("fallback %v", fb)
		}
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	types := map[string]quant.Type{}
	for _, ti := range f.Tensors {
		types[ti.Name] = ti.Type
	}
	for name, want := range map[string]quant.Type{
		"blk.0.ffn_down_exps.weight": quant.IQ4_NL, "blk.0.ffn_up_exps.weight": quant.IQ2_XXS,
		"blk.0.ffn_gate_inp.weight": quant.F32, "blk.1.attn_q.weight": quant.IQ2_XXS, "blk.1.ffn_norm.weight": quant.F32,
	} {
		if types[name] != want {
			t.Errorf("%s is %s, want %s", name, types[name], want)
		}
	}
	if n, _ := f.Uint("qwen3moe.expert_count"); n != 8 {
		t.Errorf("expert_count %d", n)
	}
}

// The 30b-a3b preset is Qwen3-30B-A3B's shape: with its 151936-token vocabulary it has ~30.5B
// parameters. (build lists the tensors without drawing a single value.)
func TestPreset30bA3bHasQwen3MoEShape(t *testing.T) {
	s, err := Preset("qwen3moe", "30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	if s.Layers != 48 || s.Dim != 2048 || s.Heads != 32 || s.HeadsKV != 4 || s.HeadSize() != 128 || s.Experts != 128 || s.ExpertsUsed != 8 || s.ExpertFFN != 768 || s.Ctx < 4096 {
		t.Fatalf("shape %+v", s)
	}
	w := gguf.NewWriter()
	toks := make([]string, 151936)
	for i := range toks {
		toks[i] = "t"
	}
	w.SetStrings("tokenizer.ggml.tokens", toks)
	var b strings.Builder
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	vocab, err := gguf.OpenBytes("vocab.gguf", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer vocab.Close()
	_, list, res, err := build(Options{Arch: "qwen3moe", Shape: s, Type: quant.Q4_K, Vocab: vocab})
	if err != nil {
		t.Fatal(err)
	}
	if res.Params < 30.3e9 || res.Params > 30.7e9 {
		t.Fatalf("%d parameters, want ~30.5B", res.Params)
	}
	if len(res.Fallbacks) != 0 {
		t.Fatalf("fallbacks %v: every row of the preset holds whole Q4_K blocks", res.Fallbacks)
	}
	for _, tn := range list {
		if tn.name == "blk.47.ffn_down_exps.weight" && (tn.dims[0] != 768 || tn.dims[1] != 2048 || tn.dims[2] != 128 || tn.streams != 128) {
			t.Fatalf("%s dims %v streams %d", tn.name, tn.dims, tn.streams)
		}
	}
}

func TestPresetAndTypeNamesAreChecked(t *testing.T) {
	if _, err := Preset("qwen3moe", "8b"); err == nil || !strings.Contains(err.Error(), "30b-a3b, tiny") {
		t.Errorf("qwen3moe 8b: %v", err)
	}
	if _, err := Preset("llama", "30b-a3b"); err == nil {
		t.Error("llama accepted the qwen3moe preset")
	}
	if typ, err := ParseType("iq3_xxs"); err != nil || typ != quant.IQ3_XXS {
		t.Errorf("iq3_xxs: %v %v", typ, err)
	}
	if _, err := ParseType("iq1_s"); err == nil || !strings.Contains(err.Error(), "iq2_xxs") {
		t.Errorf("iq1_s (no quantizer): %v", err)
	}
}

func TestBadShapesAreRefused(t *testing.T) {
	vocab := embeddedVocab(t)
	moe, _ := Preset("qwen3moe", "tiny")
	moe.ExpertsUsed = 9
	dense, _ := Preset("llama", "tiny")
	dense.Heads = 3
	for _, o := range []Options{
		{Arch: "qwen3moe", Shape: moe, Type: quant.Q8_0, Vocab: vocab},
		{Arch: "llama", Shape: dense, Type: quant.Q8_0, Vocab: vocab},
		{Arch: "gpt2", Shape: dense, Type: quant.Q8_0, Vocab: vocab},
	} {
		if _, err := Write(context.Background(), filepath.Join(t.TempDir(), "x.gguf"), o); err == nil {
			t.Errorf("%s %+v was written", o.Arch, o.Shape)
		}
	}
}

// A tiled model draws the same first rows as an untiled one and repeats them: every tensor of
// more than TileValues values holds its first rows' blocks over and over (for an expert tensor,
// each expert's own), the smaller ones are written whole.
func TestTileRepeatsTheFirstRowsOfEachStream(t *testing.T) {
	shape := Shape{Dim: 256, Layers: 1, Heads: 4, HeadsKV: 2, FFN: 512, Ctx: 64, Experts: 2, ExpertsUsed: 1, ExpertFFN: 512}
	dir := t.TempDir()
	open := func(name string, tile bool) *gguf.File {
		path := filepath.Join(dir, name)
		if _, err := Write(context.Background(), path, Options{Arch: "qwen3moe", Shape: shape, Type: quant.Q8_0, Vocab: embeddedVocab(t), Seed: 3, Tile: tile}); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	full, tiled := open("full.gguf", false), open("tiled.gguf", true)
	repeated := 0
	for _, ti := range full.Tensors {
		tt, ok := tiled.Tensor(ti.Name)
		if !ok {
			t.Fatalf("tiled model lacks %s", ti.Name)
		}
		streams := 1
		if len(ti.Dims) == 3 {
			streams = int(ti.Dims[2])
		}
		per, cols := len(ti.Data)/streams, int(ti.Dims[0])
		n := int(ti.Elements()) / streams
		if n <= TileValues {
			if !bytes.Equal(ti.Data, tt.Data) {
				t.Errorf("%s (%d values a stream) differs from the untiled model", ti.Name, n)
			}
			continue
		}
		rowBytes, err := ti.Type.RowBytes(cols)
		if err != nil {
			t.Fatal(err)
		}
		chunk := (TileValues + cols - 1) / cols * rowBytes
		for k := 0; k < streams; k++ {
			want, got := ti.Data[k*per:(k+1)*per], tt.Data[k*per:(k+1)*per]
			if !bytes.Equal(got[:chunk], want[:chunk]) {
				t.Fatalf("%s stream %d: the first rows differ from the untiled model's", ti.Name, k)
			}
			for off := chunk; off < per; off += chunk {
				if !bytes.Equal(got[off:min(per, off+chunk)], got[:min(chunk, per-off)]) {
					t.Fatalf("%s stream %d: bytes at %d do not repeat the first rows", ti.Name, k, off)
				}
			}
			if bytes.Equal(got[chunk:], want[chunk:]) {
				t.Fatalf("%s stream %d: the rest is the untiled model's, not a repeat", ti.Name, k)
			}
		}
		repeated++
	}
	if repeated == 0 {
		t.Fatal("no tensor was large enough to tile: the test shape is too small")
	}
}
