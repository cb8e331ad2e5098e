package library

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
)

// home lays out a home folder the way the tools keep their models, each file written by our
// GGUF writer: LM Studio's publisher/repo/file.gguf, Ollama's manifest naming a blob, the Hugging
// Face hub's snapshot symlinked to a blob, llama.cpp's cache with a model in two parts, a folder
// the user added with a model of an architecture the engine does not run and a download cut
// after its header.
func home(t *testing.T) (string, []Root) {
	t.Helper()
	h := t.TempDir()
	tiny := modeltest.TinySynth(t, "", "llama", quant.Q8_0, 1)
	tinyBytes, err := os.ReadFile(tiny)
	if err != nil {
		t.Fatal(err)
	}
	put := func(rel string, b []byte) string {
		p := filepath.Join(h, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	put(".lmstudio/models/acme/Tiny-GGUF/tiny-Q8_0.gguf", tinyBytes)
	put(".lmstudio/models/acme/Tiny-GGUF/README.md", []byte("not a model"))

	qwen, err := os.ReadFile(modeltest.TinySynth(t, "", "qwen3", quant.Q4_K, 2))
	if err != nil {
		t.Fatal(err)
	}
	const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	put(".ollama/models/blobs/sha256-"+digest, qwen)
	put(".ollama/models/blobs/sha256-feedface", []byte(`{"template":"..."}`))
	put(".ollama/models/manifests/registry.ollama.ai/library/qwen3/tiny", []byte(fmt.Sprintf(`{
		"schemaVersion": 2,
		"layers": [
			{"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:feedface", "size": 18},
			{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:%s", "size": %d}
		]}`, digest, len(qwen))))
	put(".ollama/models/manifests/registry.ollama.ai/library/broken/latest", []byte(`{"layers": []}`))

	blob := put(".cache/huggingface/hub/models--acme--Tiny-GGUF/blobs/abc123", tinyBytes)
	snap := filepath.Join(h, ".cache/huggingface/hub/models--acme--Tiny-GGUF/snapshots/rev1/tiny-hf.gguf")
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(blob, snap); err != nil {
		t.Fatal(err)
	}

	writeSplit(t, tiny, filepath.Join(h, ".cache/llama.cpp"), "tiny-split")

	w := gguf.NewWriter()
	w.SetString(gguf.KeyArchitecture, "gemma3")
	if err := w.AddTensorF32("token_embd.weight", quant.F32, []uint64{8, 4}, make([]float32, 32)); err != nil {
		t.Fatal(err)
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	put("mine/gemma-tiny.gguf", b)
	f, err := gguf.OpenBytes("tiny", tinyBytes)
	if err != nil {
		t.Fatal(err)
	}
	put("mine/partial/downloading.gguf", tinyBytes[:f.DataOffset+100])
	put("mine/.hidden/skipped.gguf", tinyBytes)

	roots := append(DefaultRoots(h, func(string) string { return "" }), Root{Path: filepath.Join(h, "mine"), Source: SourceFolder})
	return h, roots
}

// writeSplit writes the model at src as NAME-00001-of-00002.gguf and -00002-of-00002.gguf in dir,
// its tensors halved between the parts as gguf-split does.
func writeSplit(t *testing.T, src, dir, name string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	half := len(f.Tensors) / 2
	for k, tensors := range [][]gguf.TensorInfo{f.Tensors[:half], f.Tensors[half:]} {
		w := gguf.NewWriter()
		if k == 0 {
			for _, kv := range f.KV {
				w.SetValue(kv.Key, kv.Value)
			}
		}
		w.Set(gguf.KeySplitNo, uint16(k))
		w.Set(gguf.KeySplitCount, uint16(2))
		w.Set(gguf.KeySplitTensors, int32(len(f.Tensors)))
		for _, ti := range tensors {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%05d-of-00002.gguf", name, k+1))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestScanFindsTheModelsOfEveryToolAndSaysWhichCannotRun(t *testing.T) {
	h, roots := home(t)
	var progress []Progress
	res, err := Scan(context.Background(), Options{Roots: roots, OnProgress: func(p Progress) { progress = append(progress, p) }})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Model{}
	for _, m := range res.Changed {
		byName[m.Name] = m
	}
	want := []struct {
		name, source, arch, quant string
		parts                     int
		headerOnly                bool
		problem                   string // a piece of it; "" = runnable
	}{
		{"tiny-Q8_0", SourceLMStudio, "llama", "Q8_0", 1, false, ""},
		{"qwen3:tiny", SourceOllama, "qwen3", "Q4_K", 1, false, ""},
		{"acme/Tiny-GGUF/tiny-hf", SourceHuggingFace, "llama", "Q8_0", 1, false, ""},
		{"tiny-split", SourceLlamaCpp, "llama", "Q8_0", 2, false, ""},
		{"gemma-tiny", SourceFolder, "gemma3", "F32", 1, false, `architecture "gemma3" is not supported`},
		{"downloading", SourceFolder, "llama", "Q8_0", 1, true, "only its header is here"},
	}
	for _, w := range want {
		m, ok := byName[w.name]
		if !ok {
			t.Errorf("%s (%s) not found; found %v", w.name, w.source, res.Paths)
			continue
		}
		if m.Source != w.source || m.Arch != w.arch || m.Quant != w.quant || m.Parts != w.parts || m.HeaderOnly != w.headerOnly ||
			(w.problem == "") != (m.Problem == "") || !strings.Contains(m.Problem, w.problem) {
			t.Errorf("%s: %+v, want source %s arch %s quant %s parts %d header only %v problem %q", w.name, m, w.source, w.arch, w.quant, w.parts, w.headerOnly, w.problem)
		}
		if m.Problem == "" && (m.Params == 0 || m.SizeBytes == 0 || m.ContextLength == 0 || m.FileMtimeMs == 0) {
			t.Errorf("%s: params %d, size %d, context %d, date %d: want each set", w.name, m.Params, m.SizeBytes, m.ContextLength, m.FileMtimeMs)
		}
		if strings.Contains(m.Problem, h) {
			t.Errorf("%s: the problem %q repeats the path", w.name, m.Problem)
		}
	}
	if len(res.Changed) != len(want) || len(res.Paths) != len(want) {
		t.Errorf("found %d models (%d read): %v; want %d (no README, Ollama template blob, hidden folder or second split part)", len(res.Paths), len(res.Changed), res.Paths, len(want))
	}
	if split := byName["tiny-split"]; !strings.HasSuffix(split.Path, "tiny-split-00001-of-00002.gguf") {
		t.Errorf("the split model is listed as %s, want its first part", split.Path)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "broken:latest") {
		t.Errorf("skipped %q, want the Ollama manifest without a model layer", res.Skipped)
	}
	if len(progress) < len(want) || progress[len(progress)-1].Found != len(want) || progress[len(progress)-1].Read != len(want) {
		t.Errorf("progress %+v, want a report per model ending at %d found and read", progress, len(want))
	}
}

func TestSecondScanReadsOnlyWhatChanged(t *testing.T) {
	_, roots := home(t)
	first, err := Scan(context.Background(), Options{Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{}
	var lmstudio string
	for _, m := range first.Changed {
		known[m.Path] = m.ScanKey
		if m.Source == SourceLMStudio {
			lmstudio = m.Path
		}
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(lmstudio, later, later); err != nil {
		t.Fatal(err)
	}
	second, err := Scan(context.Background(), Options{Roots: roots, Known: known})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Changed) != 1 || second.Changed[0].Path != lmstudio || second.Progress.Unchanged != len(first.Paths)-1 || len(second.Paths) != len(first.Paths) {
		t.Fatalf("second scan read %d (%v), %d unchanged of %d; want only the touched %s", len(second.Changed), second.Changed, second.Progress.Unchanged, len(second.Paths), lmstudio)
	}
}

func TestDefaultRootsFollowTheToolsEnvironment(t *testing.T) {
	env := map[string]string{"LLAMA_CACHE": "/models/llama", "OLLAMA_MODELS": "/srv/ollama", "HF_HOME": "/hf"}
	roots := DefaultRoots("/home/u", func(k string) string { return env[k] })
	want := []Root{
		{"/models/llama", SourceLlamaCpp},
		{"/home/u/.lmstudio/models", SourceLMStudio},
		{"/home/u/.cache/lm-studio/models", SourceLMStudio},
		{"/srv/ollama", SourceOllama},
		{"/hf/hub", SourceHuggingFace},
	}
	if fmt.Sprint(roots) != fmt.Sprint(want) {
		t.Fatalf("roots %v, want %v", roots, want)
	}
	if got := DefaultRoots("/home/u", func(string) string { return "" }); got[0].Path != "/home/u/.cache/llama.cpp" || got[4].Path != "/home/u/.cache/huggingface/hub" {
		t.Fatalf("roots without the environment %v", got)
	}
}

// A file the scan cannot read is listed with the cause and what to do about it, never the path
// the row already shows.
func TestScanSaysWhatToDoAboutADamagedFile(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(modeltest.TinySynth(t, "", "llama", quant.Q8_0, 1))
	if err != nil {
		t.Fatal(err)
	}
	damaged := slices.Clone(good)
	copy(damaged[4:8], []byte{9, 0, 0, 0}) // GGUF version 9
	cut := good[:100]                      // inside the metadata
	for _, tc := range []struct {
		name string
		data []byte
		want []string
	}{
		{"newer.gguf", damaged, []string{"version 9", "download it again"}},
		{"cut.gguf", cut, []string{"ends inside its header", "download"}},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, tc.data, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Scan(context.Background(), Options{Roots: []Root{{Path: dir, Source: SourceFolder}}})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, m := range res.Changed {
			if m.Path != path {
				continue
			}
			found = true
			for _, w := range tc.want {
				if !strings.Contains(m.Problem, w) {
					t.Errorf("%s: problem %q does not say %q", tc.name, m.Problem, w)
				}
			}
			if strings.Contains(m.Problem, dir) {
				t.Errorf("%s: problem %q repeats the path", tc.name, m.Problem)
			}
		}
		if !found {
			t.Errorf("%s: not listed (%v)", tc.name, res.Paths)
		}
	}
}
