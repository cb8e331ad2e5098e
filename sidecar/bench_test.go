package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/engine/model"
)

// benchEvents posts a bench request and calls on for each event until it returns false.
func benchEvents(t *testing.T, ctx context.Context, ts testServer, body string, on func(BenchEvent) bool) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.base+"/vkllm/bench", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ts.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev BenchEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("bad bench event %q: %v", data, err)
		}
		if !on(ev) {
			break
		}
	}
	return 200
}

func TestBenchRouteStreamsProgressAndRecords(t *testing.T) {
	ts := startServer(t, ServeOptions{}) // the embedded model on the real engine
	var progress int
	var done, target *BenchEvent
	code := benchEvents(t, context.Background(), ts, `{"n_prompt":16,"n_gen":8,"reps":2,"seed":1}`, func(ev BenchEvent) bool {
		switch ev.Kind {
		case "bench:target":
			if progress > 0 {
				t.Errorf("the target came after %d progress events, want it first", progress)
			}
			target = &ev
		case "bench:progress":
			progress++
		case "bench:done":
			done = &ev
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
		return true
	})
	if code != 200 || done == nil {
		t.Fatalf("bench: status %d, done %v", code, done)
	}
	if progress != 2*3+1 { // two tests × (warm-up + 2 reps) + the final done step
		t.Errorf("%d progress events, want 7", progress)
	}
	if len(done.Records) != 2 || done.Records[0].TestName() != "pp16" || done.Records[1].TestName() != "tg8" {
		t.Fatalf("records %+v, want pp16 and tg8", done.Records)
	}
	for _, r := range done.Records {
		if len(r.SamplesNs) != 2 || r.AvgTs <= 0 || r.ModelFile != "embedded:stories260K.gguf" || r.ModelParams == 0 ||
			r.ModelSize == 0 || r.CPUInfo == "" || r.NThreads == 0 || r.Placement == "" || r.Tool != "vkllm" {
			t.Errorf("record %s: %+v, want 2 samples, a rate and the model's facts", r.TestName(), r)
		}
	}
	if target == nil || done.Target == nil {
		t.Fatalf("no target event (%v) or no target with the records (%v)", target, done.Target)
	}
	tg := done.Target
	if tg.Machine.Hostname == "" || tg.Model.Arch != "llama" || tg.ModelSHA256 == "" || tg.EngineVersion == "" || tg.Model.Context == 0 {
		t.Errorf("target lacks facts the history needs: %+v", tg)
	}
}

func TestBenchRouteCancelsWhenTheClientLeaves(t *testing.T) {
	ts := startServer(t, ServeOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	var warmup bench.Progress
	benchEvents(t, ctx, ts, `{"n_prompt":0,"n_gen":480,"reps":5}`, func(ev BenchEvent) bool {
		if ev.Kind == "bench:progress" {
			warmup = *ev.Progress
			return false // leave after the warm-up
		}
		return true
	})
	if warmup.TokensPS <= 0 {
		t.Fatalf("no warm-up progress event: %+v", warmup)
	}
	remaining := time.Duration(5 * 480 / warmup.TokensPS * float64(time.Second))
	cancel()
	// A cancelled bench frees the queue at its next check (every 16 decode steps); an uncancelled
	// one would hold it for the remaining five repetitions.
	start := time.Now()
	client := ts.client()
	if _, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(2),
	}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > remaining/2 {
		t.Fatalf("chat after leaving the bench waited %v of the %v the bench had left: it kept running", d, remaining)
	}
}

func TestBenchRouteRefusesAModelWithoutRunner(t *testing.T) {
	load, _ := newFakeLoader(0)
	ts := startServer(t, ServeOptions{Load: load})
	if code := benchEvents(t, context.Background(), ts, `{}`, nil); code != http.StatusNotImplemented {
		t.Fatalf("bench on the fake: %d, want 501", code)
	}
}

// slowingRunner is a runner whose evaluations take the next of its durations (then the last
// one): a GPU that speeds up over its first runs.
type slowingRunner struct {
	mu    sync.Mutex
	takes []time.Duration
	vocab int
}

func (r *slowingRunner) Eval(tokens []int, pos int, wantAllLogits bool) ([]float32, error) {
	r.mu.Lock()
	d := r.takes[0]
	if len(r.takes) > 1 {
		r.takes = r.takes[1:]
	}
	r.mu.Unlock()
	time.Sleep(d)
	return make([]float32, r.vocab), nil
}
func (r *slowingRunner) Reset()       {}
func (r *slowingRunner) Close() error { return nil }
func (r *slowingRunner) Name() string { return "slowing" }

// warmingModel is a fake model on a placement whose runner speeds up over its first runs.
type warmingModel struct {
	fakeModel
	placement string
	runner    *slowingRunner
}

func (m *warmingModel) Info() engine.ModelInfo {
	info := m.fakeModel.Info()
	info.Placement, info.VocabSize = m.placement, m.runner.vocab
	if m.placement != "cpu" {
		info.Backend = "vulkan"
	}
	return info
}
func (m *warmingModel) Runner() model.Runner { return m.runner }

// The sidecar's bench warms a GPU placement up until its runs are steady (the first runs of a
// GPU create pipelines and leave its clocks low), and a CPU with llama-bench's one warm-up:
// fails if the route does not ask for the steady warm-up on a GPU.
func TestBenchRouteWarmsAGPUUntilSteady(t *testing.T) {
	for _, tc := range []struct {
		placement string
		atLeast   int
		atMost    int
	}{{"resident", 3, 5}, {"cpu", 1, 1}} {
		t.Run(tc.placement, func(t *testing.T) {
			load := func(ctx context.Context, opts engine.LoadOptions) (Model, error) {
				ms := time.Millisecond
				return &warmingModel{fakeModel: fakeModel{name: "warming.gguf"}, placement: tc.placement,
					runner: &slowingRunner{takes: []time.Duration{160 * ms, 80 * ms, 40 * ms, 40 * ms}, vocab: 300}}, nil
			}
			ts := startServer(t, ServeOptions{Load: load})
			var done *BenchEvent
			code := benchEvents(t, context.Background(), ts, `{"n_prompt":8,"n_gen":0,"reps":1,"seed":1}`, func(ev BenchEvent) bool {
				if ev.Kind == "bench:done" || ev.Kind == "bench:error" {
					done = &ev
				}
				return true
			})
			if code != 200 || done == nil || done.Kind != "bench:done" || len(done.Records) != 1 {
				t.Fatalf("bench: status %d, last event %+v", code, done)
			}
			if w := done.Records[0].Warmup; w < tc.atLeast || w > tc.atMost {
				t.Fatalf("%s placement: %d warm-up runs, want %d to %d", tc.placement, w, tc.atLeast, tc.atMost)
			}
		})
	}
}
