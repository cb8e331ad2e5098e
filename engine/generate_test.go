package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/embedded"
	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/sample"
)

func loadEmbedded(t *testing.T) *Engine {
	t.Helper()
	e, err := Load(context.Background(), LoadOptions{Backend: BackendCPU, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// scriptedRunner stands in for a forward pass: every Eval returns logits that make the next
// token of the script the argmax.
type scriptedRunner struct {
	vocab  int
	script []int
	next   int
	evals  [][]int
}

func (s *scriptedRunner) Eval(tokens []int, pos int, all bool) ([]float32, error) {
	s.evals = append(s.evals, append([]int(nil), tokens...))
	logits := make([]float32, s.vocab)
	if s.next < len(s.script) {
		logits[s.script[s.next]] = 10
	}
	s.next++
	return logits, nil
}
func (s *scriptedRunner) Reset()       {}
func (s *scriptedRunner) Close() error { return nil }
func (s *scriptedRunner) Name() string { return "scripted" }

// withScript replaces the engine's runner with one that produces ids.
func withScript(t *testing.T, e *Engine, ids ...int) *scriptedRunner {
	t.Helper()
	r := &scriptedRunner{vocab: e.info.VocabSize, script: ids}
	e.runner.Close()
	e.runner = r
	e.cached = nil
	return r
}

// byteToken returns the id of the SPM byte token <0xNN>.
func byteToken(t *testing.T, e *Engine, b byte) int {
	t.Helper()
	want := fmt.Sprintf("<0x%02X>", b)
	for id := 0; id < e.tok.VocabSize(); id++ {
		if e.tok.Token(id) == want {
			return id
		}
	}
	t.Fatalf("no byte token %s", want)
	return -1
}

func collect(t *testing.T, e *Engine, req GenerateRequest) (Result, []Piece) {
	t.Helper()
	var pieces []Piece
	res, err := e.Generate(context.Background(), req, func(p Piece) error {
		pieces = append(pieces, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var joined strings.Builder
	for _, p := range pieces {
		joined.WriteString(p.Text)
	}
	if joined.String() != res.Text {
		t.Fatalf("streamed text %q differs from Result.Text %q", joined.String(), res.Text)
	}
	return res, pieces
}

func TestLoadEmbeddedModelDescribesIt(t *testing.T) {
	e := loadEmbedded(t)
	info := e.Info()
	if info.Name != "stories260K.gguf" || info.Arch != "llama" || info.Backend != "cpu" || info.Layers != 5 || info.Dim != 64 || info.VocabSize != 512 {
		t.Fatalf("info = %+v", info)
	}
	if info.Params <= 0 || info.FileSize <= 0 || info.Context <= 0 || info.Quant == "" {
		t.Fatalf("info has empty fields: %+v", info)
	}
}

func TestGreedyGenerateWritesAStory(t *testing.T) {
	e := loadEmbedded(t)
	res, pieces := collect(t, e, GenerateRequest{Prompt: "Once upon a time", MaxTokens: 20})
	if !strings.HasPrefix(res.Text, ", there was a little girl named Lily") {
		t.Fatalf("text %q", res.Text)
	}
	if len(res.Generated) != 20 || res.Stop != StopLength || len(pieces) < 20 {
		t.Fatalf("generated %d tokens, stop %q, %d pieces", len(res.Generated), res.Stop, len(pieces))
	}
	if !slices.Equal(res.PromptTokens, []int{1, 403, 407, 261, 378}) {
		t.Fatalf("prompt tokens %v", res.PromptTokens)
	}
	tm := res.Timings
	if tm.PromptTokens != 5 || tm.GeneratedTokens != 20 || tm.PromptPerSec <= 0 || tm.GenPerSec <= 0 || tm.TimeToFirst <= 0 {
		t.Fatalf("timings %+v", tm)
	}
}

func TestSameSeedSamplesTheSameStory(t *testing.T) {
	e := loadEmbedded(t)
	req := GenerateRequest{Prompt: "Once upon a time", MaxTokens: 24, Sampling: sample.Params{Temperature: 1, TopK: 40, TopP: 0.95, Seed: 7}}
	a, _ := collect(t, e, req)
	b, _ := collect(t, e, req)
	if !slices.Equal(a.Generated, b.Generated) {
		t.Fatalf("seed 7 twice: %v vs %v", a.Generated, b.Generated)
	}
	req.Sampling.Seed = 8
	c, _ := collect(t, e, req)
	if slices.Equal(a.Generated, c.Generated) {
		t.Fatal("seeds 7 and 8 sampled identical 24-token stories")
	}
}

func TestStopStringEndsGenerationAndIsNotEmitted(t *testing.T) {
	e := loadEmbedded(t)
	res, _ := collect(t, e, GenerateRequest{Prompt: "Once upon a time", MaxTokens: 40, Stop: []string{"Lily"}})
	if res.Stop != StopString || res.Text != ", there was a little girl named " {
		t.Fatalf("stop %q text %q", res.Stop, res.Text)
	}
}

func TestEOSEndsGenerationWithoutText(t *testing.T) {
	e := loadEmbedded(t)
	a := byteToken(t, e, 'a')
	withScript(t, e, a, e.tok.EOS(), a)
	res, _ := collect(t, e, GenerateRequest{Prompt: "x", MaxTokens: 10})
	if res.Stop != StopEOS || res.Text != "a" || !slices.Equal(res.Generated, []int{a}) {
		t.Fatalf("stop %q text %q generated %v", res.Stop, res.Text, res.Generated)
	}
}

func TestStreamingNeverSplitsAUTF8Character(t *testing.T) {
	e := loadEmbedded(t)
	// "é✓" = C3 A9, E2 9C 93, one byte token each
	bs := []byte("é✓")
	ids := make([]int, len(bs))
	for i, b := range bs {
		ids[i] = byteToken(t, e, b)
	}
	withScript(t, e, append(ids, e.tok.EOS())...)
	res, pieces := collect(t, e, GenerateRequest{Prompt: "x", MaxTokens: 10})
	var texts []string
	for _, p := range pieces {
		texts = append(texts, p.Text)
	}
	want := []string{"", "é", "", "", "✓"}
	if !slices.Equal(texts, want) || res.Text != "é✓" {
		t.Fatalf("pieces %q (want %q), text %q", texts, want, res.Text)
	}
}

func TestStopStringSpanningTokensIsHeldBackThenDropped(t *testing.T) {
	e := loadEmbedded(t)
	var ids []int
	for _, b := range []byte("ab<|e") {
		ids = append(ids, byteToken(t, e, b))
	}
	withScript(t, e, append(ids, byteToken(t, e, 'n'), byteToken(t, e, 'd'))...)
	res, pieces := collect(t, e, GenerateRequest{Prompt: "x", MaxTokens: 20, Stop: []string{"<|end"}})
	var texts []string
	for _, p := range pieces {
		texts = append(texts, p.Text)
	}
	want := []string{"a", "b", "", "", "", "", ""}
	if res.Stop != StopString || res.Text != "ab" || !slices.Equal(texts, want) {
		t.Fatalf("stop %q text %q pieces %q (want %q)", res.Stop, res.Text, texts, want)
	}
}

func TestHeldBackTextIsReleasedAtTheEnd(t *testing.T) {
	e := loadEmbedded(t)
	withScript(t, e, byteToken(t, e, 'a'), byteToken(t, e, '<'), e.tok.EOS())
	res, pieces := collect(t, e, GenerateRequest{Prompt: "x", MaxTokens: 20, Stop: []string{"<|end"}})
	last := pieces[len(pieces)-1]
	if res.Text != "a<" || last.ID != -1 || last.Text != "<" {
		t.Fatalf("text %q, last piece %+v", res.Text, last)
	}
}

func TestCancellingStopsGenerationWithoutError(t *testing.T) {
	e := loadEmbedded(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	res, err := e.Generate(ctx, GenerateRequest{Prompt: "Once upon a time", MaxTokens: 50}, func(p Piece) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if err != nil || res.Stop != StopCancelled || len(res.Generated) != 3 {
		t.Fatalf("err %v stop %q generated %d", err, res.Stop, len(res.Generated))
	}
}

func TestCallbackErrorAbortsWithPartialResult(t *testing.T) {
	e := loadEmbedded(t)
	boom := errors.New("client went away")
	res, err := e.Generate(context.Background(), GenerateRequest{Prompt: "Once upon a time", MaxTokens: 50}, func(p Piece) error {
		return boom
	})
	if !errors.Is(err, boom) || len(res.Generated) != 1 {
		t.Fatalf("err %v generated %d", err, len(res.Generated))
	}
}

func TestPromptLongerThanContextIsRefused(t *testing.T) {
	e, err := Load(context.Background(), LoadOptions{Backend: BackendCPU, Context: 8, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.Generate(context.Background(), GenerateRequest{Prompt: "Once upon a time there was a little dog"}, nil)
	if err == nil || !strings.Contains(err.Error(), "context holds 8") {
		t.Fatalf("err = %v", err)
	}
	res, err := e.Generate(context.Background(), GenerateRequest{Prompt: "Once upon a time"}, nil)
	if err != nil || res.Stop != StopLength || len(res.Generated) != 8-5+1 {
		t.Fatalf("filling the context: err %v stop %q generated %d", err, res.Stop, len(res.Generated))
	}
}

func TestEmptyRequestIsAnError(t *testing.T) {
	e := loadEmbedded(t)
	if _, err := e.Generate(context.Background(), GenerateRequest{}, nil); err == nil {
		t.Fatal("empty request accepted")
	}
}

func TestSecondRequestReusesTheCachedPrefix(t *testing.T) {
	e := loadEmbedded(t)
	first, _ := collect(t, e, GenerateRequest{Prompt: "Once upon a time", MaxTokens: 8})
	again, _ := collect(t, e, GenerateRequest{Prompt: "Once upon a time", MaxTokens: 8})
	if again.Timings.PromptTokens != 1 || !slices.Equal(first.Generated, again.Generated) {
		t.Fatalf("repeat: evaluated %d prompt tokens, generated %v vs %v", again.Timings.PromptTokens, again.Generated, first.Generated)
	}
	longer, _ := collect(t, e, GenerateRequest{Prompt: "Once upon a time, there was", MaxTokens: 4})
	fresh := loadEmbedded(t)
	want, _ := collect(t, fresh, GenerateRequest{Prompt: "Once upon a time, there was", MaxTokens: 4})
	if !slices.Equal(longer.Generated, want.Generated) {
		t.Fatalf("with a reused prefix %v, fresh %v", longer.Generated, want.Generated)
	}
}

const chatML = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

func writeRandom(t *testing.T, s modeltest.Spec) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "random.gguf")
	if err := modeltest.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestChatUsesTheModelTemplate(t *testing.T) {
	s := modeltest.Small("qwen2", quant.Q8_0, 3)
	s.ChatTemplate = chatML
	e, err := Load(context.Background(), LoadOptions{Path: writeRandom(t, s), Backend: BackendCPU, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.Info().HasTemplate {
		t.Fatal("HasTemplate false")
	}
	msgs := []Message{{Role: "user", Content: "Hello world"}}
	text, err := e.RenderChat(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if text != "<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n" {
		t.Fatalf("rendered %q", text)
	}
	res, _ := collect(t, e, GenerateRequest{Messages: msgs, MaxTokens: 3})
	want, _ := e.Tokenize(text, true)
	if !slices.Equal(res.PromptTokens, want) || len(res.Generated) != 3 {
		t.Fatalf("prompt tokens %v, want %v; generated %v", res.PromptTokens, want, res.Generated)
	}
}

func TestChatWithoutTemplateUsesFallback(t *testing.T) {
	e := loadEmbedded(t)
	text, err := e.RenderChat(context.Background(), []Message{{Role: "user", Content: "Tell me a story"}})
	if err != nil || text != "User: Tell me a story\nAssistant:" {
		t.Fatalf("rendered %q, %v", text, err)
	}
}

func TestEveryArchitectureGeneratesThroughTheEngine(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			e, err := Load(context.Background(), LoadOptions{Path: writeRandom(t, modeltest.Small(arch, quant.Q4_K, 5)), Backend: BackendCPU, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			res, _ := collect(t, e, GenerateRequest{Prompt: "Once upon a time", MaxTokens: 5})
			if len(res.Generated) == 0 || e.Info().Arch != arch {
				t.Fatalf("generated %v, arch %q", res.Generated, e.Info().Arch)
			}
		})
	}
}

func TestLoadErrorsNameTheCause(t *testing.T) {
	cases := []struct {
		name string
		opts LoadOptions
		want string
	}{
		{"missing file", LoadOptions{Path: filepath.Join(t.TempDir(), "nope.gguf")}, "nope.gguf"},
		{"unknown backend", LoadOptions{Backend: "tpu"}, `backend "tpu"`},
		{"gpu without a gpu backend", LoadOptions{Backend: BackendGPU}, "no GPU backend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestAutoBackendFallsBackWhenTheGPUDeclines(t *testing.T) {
	t.Cleanup(func() { RegisterGPUBackend("", nil) })
	calls := 0
	RegisterGPUBackend("fake", func(ctx context.Context, f *gguf.File, m *model.Model, opts LoadOptions) (GPURunner, error) {
		calls++
		return GPURunner{}, fmt.Errorf("%w: needs 9 MB of 4 MB", ErrGPUDeclined)
	})
	e, err := Load(context.Background(), LoadOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if calls != 1 || e.Info().Backend != "cpu" {
		t.Fatalf("calls %d backend %q", calls, e.Info().Backend)
	}
	if _, err := Load(context.Background(), LoadOptions{Backend: BackendGPU}); err == nil || !strings.Contains(err.Error(), "needs 9 MB") {
		t.Fatalf("forced gpu after a decline: %v", err)
	}
	if _, err := Load(context.Background(), LoadOptions{Backend: BackendCPU}); err != nil || calls != 2 {
		t.Fatalf("cpu backend consulted the gpu: calls %d err %v", calls, err)
	}
}

func TestRegisteredGPUBackendRunsTheModel(t *testing.T) {
	t.Cleanup(func() { RegisterGPUBackend("", nil) })
	RegisterGPUBackend("fake", func(ctx context.Context, f *gguf.File, m *model.Model, opts LoadOptions) (GPURunner, error) {
		return GPURunner{Runner: &scriptedRunner{vocab: m.Hyper.VocabSize, script: []int{300, 301}}, Placement: "resident", Context: 64}, nil
	})
	e, err := Load(context.Background(), LoadOptions{Backend: BackendGPU})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info := e.Info()
	if info.Backend != "fake" || info.Placement != "resident" || info.Context != 64 || e.Runner().Name() != "scripted" {
		t.Fatalf("info %+v runner %s", info, e.Runner().Name())
	}
	res, _ := collect(t, e, GenerateRequest{Prompt: "Once", MaxTokens: 2})
	if !slices.Equal(res.Generated, []int{300, 301}) {
		t.Fatalf("generated %v", res.Generated)
	}
}

// Load starts the GPU backend's preparation (the Vulkan instance) before it asks the backend,
// for every backend choice that may use the GPU, and never for the CPU.
func TestLoadStartsTheGPUPreparation(t *testing.T) {
	t.Cleanup(func() { RegisterGPUBackend("", nil); RegisterGPUPrepare(nil) })
	prepared := make(chan struct{}, 8)
	RegisterGPUPrepare(func() { prepared <- struct{}{} })
	RegisterGPUBackend("fake", func(ctx context.Context, f *gguf.File, m *model.Model, opts LoadOptions) (GPURunner, error) {
		return GPURunner{}, fmt.Errorf("%w: no room", ErrGPUDeclined)
	})
	for _, tc := range []struct {
		backend Backend
		want    bool
	}{{BackendAuto, true}, {BackendCPU, false}} {
		e, err := Load(context.Background(), LoadOptions{Backend: tc.backend, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		got := false
		select {
		case <-prepared:
			got = true
		case <-time.After(2 * time.Second):
		}
		if got != tc.want {
			t.Fatalf("backend %q: preparation started %v, want %v", tc.backend, got, tc.want)
		}
	}
}

// A model file loaded for the GPU has its mapped pages faulted in while the GPU is prepared
// (gguf.File.Prefault): the backend sees a file whose prefault has started.
func TestLoadPrefaultsTheFileForTheGPU(t *testing.T) {
	t.Cleanup(func() { RegisterGPUBackend("", nil); RegisterGPUPrepare(nil) })
	RegisterGPUPrepare(func() {})
	var prefaulted []bool
	RegisterGPUBackend("fake", func(ctx context.Context, f *gguf.File, m *model.Model, opts LoadOptions) (GPURunner, error) {
		prefaulted = append(prefaulted, f.Prefaulted())
		return GPURunner{}, fmt.Errorf("%w: no room", ErrGPUDeclined)
	})
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(path, embedded.ModelGGUF, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Load(context.Background(), LoadOptions{Path: path, Backend: BackendAuto, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if len(prefaulted) != 1 || !prefaulted[0] {
		t.Fatalf("the GPU backend saw prefault runs %v, want one started", prefaulted)
	}
}

// greedyScriptedRunner is a scriptedRunner that also picks the next token itself (as the
// resident Vulkan driver's device argmax does), recording those steps apart.
type greedyScriptedRunner struct {
	scriptedRunner
	greedy [][2]int // (token, pos) of each Greedy call
}

func (g *greedyScriptedRunner) Greedy(token, pos int) (int, error) {
	g.greedy = append(g.greedy, [2]int{token, pos})
	logits, err := g.Eval([]int{token}, pos, false)
	if err != nil {
		return 0, err
	}
	g.evals = g.evals[:len(g.evals)-1] // counted as a Greedy step, not an Eval
	return sample.Argmax(logits), nil
}

// A greedy request without a repetition penalty takes the runner's own argmax from the second
// token on (the prompt's logits still come back for the first); a penalty or a temperature
// needs the logits, so every step is an Eval. The tokens are the script's either way.
func TestGreedyGenerateTakesTheDevicesArgmax(t *testing.T) {
	e := loadEmbedded(t)
	script := []int{300, 301, 302, 303, 304, 305}
	for _, tc := range []struct {
		name     string
		sampling sample.Params
		onDevice bool
	}{
		{"greedy", sample.Params{}, true},
		{"greedy with a penalty of 1", sample.Params{RepeatPenalty: 1}, true},
		{"greedy with a penalty", sample.Params{RepeatPenalty: 1.1}, false},
		{"sampled", sample.Params{Temperature: 0.7, TopK: 1, Seed: 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &greedyScriptedRunner{scriptedRunner: scriptedRunner{vocab: e.info.VocabSize, script: script}}
			e.runner.Close()
			e.runner, e.cached = g, nil
			res, _ := collect(t, e, GenerateRequest{PromptTokens: []int{1, 403, 407}, MaxTokens: len(script), Sampling: tc.sampling})
			if !slices.Equal(res.Generated, script) {
				t.Fatalf("generated %v, want the script %v", res.Generated, script)
			}
			wantGreedy := 0
			if tc.onDevice {
				wantGreedy = len(script) - 1
			}
			if len(g.greedy) != wantGreedy || len(g.evals) != 1+len(script)-1-wantGreedy {
				t.Fatalf("%d device argmax steps and %d evaluations, want %d and %d", len(g.greedy), len(g.evals), wantGreedy, 1+len(script)-1-wantGreedy)
			}
			for i, step := range g.greedy {
				if step != [2]int{script[i], 3 + i} {
					t.Fatalf("device step %d evaluated token %d at %d, want %d at %d", i, step[0], step[1], script[i], 3+i)
				}
			}
		})
	}
}

// windowedScriptedRunner is a scriptedRunner with prefill windows of its own.
type windowedScriptedRunner struct {
	scriptedRunner
	window int
}

func (w *windowedScriptedRunner) PrefillWindow() int { return w.window }

// A long prompt goes to the runner in pieces of prefillChunk tokens, or of the runner's prefill
// window where that is larger (the resident driver's 512 rows), never cutting a window short.
func TestPromptPiecesFollowThePrefillWindow(t *testing.T) {
	e := loadEmbedded(t)
	prompt := make([]int, 700)
	for i := range prompt {
		prompt[i] = 300 + i%50
	}
	for _, tc := range []struct {
		name   string
		runner interface {
			model.Runner
			evaluated() [][]int
		}
		want []int
	}{
		{"no window", &scriptedRunner{vocab: e.info.VocabSize, script: []int{5}}, []int{prefillChunk, prefillChunk, 700 - 2*prefillChunk, 1}},
		{"window 600", &windowedScriptedRunner{scriptedRunner{vocab: e.info.VocabSize, script: []int{5}}, 600}, []int{600, 100, 1}},
		{"window 100", &windowedScriptedRunner{scriptedRunner{vocab: e.info.VocabSize, script: []int{5}}, 100}, []int{prefillChunk, prefillChunk, 700 - 2*prefillChunk, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.runner.Close()
			e.runner, e.cached = tc.runner, nil
			if _, err := e.Generate(context.Background(), GenerateRequest{PromptTokens: prompt, MaxTokens: 2, Sampling: sample.Params{RepeatPenalty: 1.1}}, nil); err != nil {
				t.Fatal(err)
			}
			var sizes []int
			for _, ev := range tc.runner.evaluated() {
				sizes = append(sizes, len(ev))
			}
			if !slices.Equal(sizes, tc.want) {
				t.Fatalf("evaluated pieces of %v tokens, want %v", sizes, tc.want)
			}
		})
	}
}

func (s *scriptedRunner) evaluated() [][]int { return s.evals }

// drawingRunner stands in for a runner that draws on its device (SamplingRunner): each Sample
// evaluates on the runner it wraps and draws with the uniform it is given, as the host would.
type drawingRunner struct {
	model.Runner
	calls [][2]float64 // (u, uNext) of each Sample
}

func (d *drawingRunner) SamplesOnDevice(p sample.Params) bool {
	return !p.Greedy() && (p.RepeatPenalty == 0 || p.RepeatPenalty == 1)
}

func (d *drawingRunner) Sample(token, pos int, p sample.Params, u, uNext float64) (int, error) {
	d.calls = append(d.calls, [2]float64{u, uNext})
	logits, err := d.Runner.Eval([]int{token}, pos, false)
	if err != nil {
		return 0, err
	}
	return sample.New(p).SampleWith(logits, u), nil
}

// A sampled request on a runner that draws on its device generates what the host's sampler
// generates with the same seed: the k-th token takes the sampler's k-th uniform, and each step's
// uNext is the next step's u (the step queued ahead draws with it). A repetition penalty keeps
// the draw on the host.
func TestSampledGenerateDrawsOnTheDeviceWithTheSamplersUniforms(t *testing.T) {
	prompt := []int{1, 403, 407}
	for _, tc := range []struct {
		name     string
		sampling sample.Params
		onDevice bool
	}{
		{"the app's defaults", sample.Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05, Seed: 11}, true},
		{"hot, no cut", sample.Params{Temperature: 1.5, Seed: 12}, true},
		{"with a penalty", sample.Params{Temperature: 0.7, RepeatPenalty: 1.2, Seed: 13}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := GenerateRequest{PromptTokens: prompt, MaxTokens: 40, Sampling: tc.sampling}
			host := loadEmbedded(t)
			want, _ := collect(t, host, req)
			e := loadEmbedded(t)
			d := &drawingRunner{Runner: e.runner}
			e.runner, e.cached = d, nil
			got, _ := collect(t, e, req)
			if !slices.Equal(got.Generated, want.Generated) {
				t.Fatalf("drawn on the device: %v\non the host: %v", got.Generated, want.Generated)
			}
			if len(want.Generated) < 10 {
				t.Fatalf("only %d tokens generated: the case checks too little", len(want.Generated))
			}
			wantCalls := 0
			if tc.onDevice {
				wantCalls = len(got.Generated) - 1
				if got.Stop == StopEOS {
					wantCalls = len(got.Generated)
				}
			}
			if len(d.calls) != wantCalls {
				t.Fatalf("%d device draws for %d tokens (stop %v), want %d", len(d.calls), len(got.Generated), got.Stop, wantCalls)
			}
			for i := 1; i < len(d.calls); i++ {
				if d.calls[i][0] != d.calls[i-1][1] {
					t.Fatalf("draw %d took u %v, the step before queued it with %v", i, d.calls[i][0], d.calls[i-1][1])
				}
			}
		})
	}
}

// nanRunner is a forward pass whose logits are all NaN from its nanFrom-th Eval on, as a file
// with damaged weights gives.
type nanRunner struct {
	scriptedRunner
	nanFrom int
}

func (n *nanRunner) Eval(tokens []int, pos int, all bool) ([]float32, error) {
	logits, err := n.scriptedRunner.Eval(tokens, pos, all)
	if n.next > n.nanFrom {
		for i := range logits {
			logits[i] = float32(math.NaN())
		}
	}
	return logits, err
}

// Logits that pick no token end a generation with ErrNoValidLogits, which names the likely
// cause and the remedy, and keep what was generated before, greedy or sampled.
func TestNaNLogitsEndWithTheCauseAndTheRemedy(t *testing.T) {
	e := loadEmbedded(t)
	for _, tc := range []struct {
		name    string
		temp    float32
		nanFrom int
		kept    int
	}{
		{"greedy, from the prompt", 0, 0, 0},
		{"greedy, after two tokens", 0, 2, 2},
		{"sampled, after one token", 0.8, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			letter := byteToken(t, e, 'a')
			r := &nanRunner{scriptedRunner: scriptedRunner{vocab: e.info.VocabSize, script: []int{letter, letter, letter, letter}}, nanFrom: tc.nanFrom}
			e.runner.Close()
			e.runner, e.cached = r, nil
			res, err := e.Generate(context.Background(), GenerateRequest{Prompt: "Once", MaxTokens: 8, Sampling: sample.Params{Temperature: tc.temp, Seed: 1}}, func(Piece) error { return nil })
			if !errors.Is(err, ErrNoValidLogits) {
				t.Fatalf("err %v, want ErrNoValidLogits", err)
			}
			for _, want := range []string{"NaN", "damaged", "download or convert it again"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
			if len(res.Generated) != tc.kept || res.Text != strings.Repeat("a", tc.kept) {
				t.Errorf("kept %v (%q), want %d tokens", res.Generated, res.Text, tc.kept)
			}
		})
	}
}
