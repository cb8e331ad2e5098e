package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// llamaBenchSample is a pp512 row as llama-bench writes it (values from llama-bench's published
// README example), used to check that we parse its JSON and reproduce its statistics.
const llamaBenchSample = `[
  {
    "build_commit": "8cf427ff", "build_number": 5163, "cpu_info": "AMD Ryzen 7 7800X3D 8-Core Processor",
    "gpu_info": "NVIDIA GeForce RTX 4080", "backends": "CUDA",
    "model_filename": "models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "model_type": "qwen2 7B Q4_K - Medium",
    "model_size": 4677120000, "model_n_params": 7615616512, "n_batch": 2048, "n_ubatch": 512, "n_threads": 8,
    "cpu_mask": "0x0", "cpu_strict": false, "poll": 50, "type_k": "f16", "type_v": "f16", "n_gpu_layers": 99,
    "split_mode": "layer", "main_gpu": 0, "no_kv_offload": false, "flash_attn": false, "tensor_split": "0.00",
    "use_mmap": true, "embeddings": false, "n_prompt": 512, "n_gen": 0, "n_depth": 0,
    "test_time": "2025-04-24T11:58:50Z", "avg_ns": 72135640, "stddev_ns": 1453752, "avg_ts": 7100.002165,
    "stddev_ts": 140.341520, "samples_ns": [ 74601900, 71632900, 71745200, 71952700, 70745500 ],
    "samples_ts": [ 6863.1, 7147.55, 7136.37, 7115.79, 7237.21 ]
  }
]`

func TestSummarizeReproducesLlamaBenchStatistics(t *testing.T) {
	records, err := ParseLlamaBench(strings.NewReader(llamaBenchSample))
	if err != nil {
		t.Fatalf("ParseLlamaBench: %v", err)
	}
	if len(records) != 1 || records[0].Tool != "llama-bench" || records[0].TestName() != "pp512" {
		t.Fatalf("parsed %+v", records)
	}
	want := records[0].Summary
	got := Summarize(want.SamplesNs, records[0].NPrompt)
	if got.AvgNs != want.AvgNs {
		t.Errorf("avg_ns = %d, llama-bench says %d", got.AvgNs, want.AvgNs)
	}
	if d := got.StddevNs - want.StddevNs; d < -1 || d > 1 {
		t.Errorf("stddev_ns = %d, llama-bench says %d", got.StddevNs, want.StddevNs)
	}
	if math.Abs(got.AvgTs-want.AvgTs) > 1e-5 {
		t.Errorf("avg_ts = %.6f, llama-bench says %.6f", got.AvgTs, want.AvgTs)
	}
	if math.Abs(got.StddevTs-want.StddevTs) > 1e-5 {
		t.Errorf("stddev_ts = %.6f, llama-bench says %.6f", got.StddevTs, want.StddevTs)
	}
}

func TestSummarizeOnKnownSamples(t *testing.T) {
	tests := []struct {
		name            string
		samplesNs       []int64
		tokens          int
		avgTs, stddevTs float64
		avgNs, stddevNs int64
	}{
		// rates 100, 50, 25 tok/s: mean 58.333..., n-1 stddev sqrt(((41.67)^2+(8.33)^2+(33.33)^2)/2)
		{"three reps", []int64{1e9, 2e9, 4e9}, 100, 175.0 / 3, math.Sqrt((math.Pow(100-175.0/3, 2) + math.Pow(50-175.0/3, 2) + math.Pow(25-175.0/3, 2)) / 2), 2333333333, 1527525232},
		{"one rep has no deviation", []int64{5e8}, 10, 20, 0, 5e8, 0},
		{"identical reps", []int64{1e6, 1e6}, 1, 1000, 0, 1e6, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.samplesNs, tc.tokens)
			if math.Abs(s.AvgTs-tc.avgTs) > 1e-9 || math.Abs(s.StddevTs-tc.stddevTs) > 1e-9 {
				t.Errorf("ts = %.9f ± %.9f, want %.9f ± %.9f", s.AvgTs, s.StddevTs, tc.avgTs, tc.stddevTs)
			}
			if s.AvgNs != tc.avgNs || s.StddevNs != tc.stddevNs {
				t.Errorf("ns = %d ± %d, want %d ± %d", s.AvgNs, s.StddevNs, tc.avgNs, tc.stddevNs)
			}
		})
	}
}

func TestParseLlamaBenchAcceptsJSONLAndRejectsGarbage(t *testing.T) {
	var arr []map[string]any
	if err := json.Unmarshal([]byte(llamaBenchSample), &arr); err != nil {
		t.Fatal(err)
	}
	line, _ := json.Marshal(arr[0])
	jsonl := string(line) + "\n\n" + string(line) + "\n"
	records, err := ParseLlamaBench(strings.NewReader(jsonl))
	if err != nil || len(records) != 2 {
		t.Fatalf("jsonl: %d records, err %v", len(records), err)
	}
	for _, bad := range []string{"", "not json", `[{"foo": 1}]`, "{\"n_prompt\": 1}\n{broken"} {
		if _, err := ParseLlamaBench(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseLlamaBench(%q) accepted garbage", bad)
		}
	}
}

// countingEvaluator records what the bench asks of a model.
type countingEvaluator struct {
	resets     int
	calls      [][]int
	positions  []int
	delay      time.Duration
	cancelAt   int
	cancel     context.CancelFunc
	failOnCall int
}

func (c *countingEvaluator) Eval(tokens []int, pos int, _ bool) ([]float32, error) {
	c.calls = append(c.calls, append([]int(nil), tokens...))
	c.positions = append(c.positions, pos)
	if c.failOnCall > 0 && len(c.calls) == c.failOnCall {
		return nil, errors.New("device lost")
	}
	if c.cancel != nil && len(c.calls) == c.cancelAt {
		c.cancel()
	}
	time.Sleep(c.delay)
	return []float32{0}, nil
}

func (c *countingEvaluator) Reset() { c.resets++ }

func TestRunFollowsLlamaBenchSemantics(t *testing.T) {
	ev := &countingEvaluator{delay: 100 * time.Microsecond}
	var events []Progress
	records, err := Run(context.Background(), ev, Config{NPrompt: 8, NGen: 4, Reps: 3, VocabSize: 100, Seed: 1}, func(p Progress) { events = append(events, p) })
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(records) != 2 || records[0].TestName() != "pp8" || records[1].TestName() != "tg4" {
		t.Fatalf("records %+v", records)
	}
	// pp: warm-up + 3 reps, each one batched call of 8 tokens at position 0 from an empty cache.
	for i := 0; i < 4; i++ {
		if len(ev.calls[i]) != 8 || ev.positions[i] != 0 {
			t.Errorf("pp call %d: %d tokens at pos %d, want 8 at 0", i, len(ev.calls[i]), ev.positions[i])
		}
	}
	// tg: warm-up + 3 reps of 4 single-token steps at positions 0..3.
	tg := ev.calls[4:]
	if len(tg) != 16 {
		t.Fatalf("tg made %d calls, want 16", len(tg))
	}
	for i, c := range tg {
		if len(c) != 1 || ev.positions[4+i] != i%4 {
			t.Errorf("tg call %d: %d tokens at pos %d", i, len(c), ev.positions[4+i])
		}
	}
	if ev.resets != 8 {
		t.Errorf("Reset called %d times, want one per run (8)", ev.resets)
	}
	if !equalInts(ev.calls[0], ev.calls[0]) || equalInts(ev.calls[1], ev.calls[2]) {
		t.Errorf("each repetition must get a fresh synthetic prompt")
	}
	for _, c := range ev.calls {
		for _, tok := range c {
			if tok < firstToken || tok >= 100 {
				t.Fatalf("synthetic token %d outside [%d,100)", tok, firstToken)
			}
		}
	}
	for _, r := range records {
		if len(r.SamplesNs) != 3 || r.AvgTs <= 0 || r.Reps != 3 || r.Warmup != 1 {
			t.Errorf("record %s: %d samples, avg %.1f", r.TestName(), len(r.SamplesNs), r.AvgTs)
		}
	}
	if records[0].Decode != "" || records[1].Decode != DecodeLogits {
		t.Errorf("decode: pp %q, tg %q; want \"\" and %q", records[0].Decode, records[1].Decode, DecodeLogits)
	}
	if records[0].TTFTMs <= 0 || records[1].TTFTMs != 0 {
		t.Errorf("TTFT belongs to the pp test only: pp %.3f tg %.3f", records[0].TTFTMs, records[1].TTFTMs)
	}
	if len(events) != 9 || events[0].Phase != PhaseWarmup || events[len(events)-1].Phase != PhaseDone {
		t.Errorf("progress events %+v", events)
	}
}

func TestRunStopsOnCancelAndReportsFinishedRecords(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ev := &countingEvaluator{cancelAt: 6, cancel: cancel}
	records, err := Run(ctx, ev, Config{NPrompt: 4, NGen: 64, Reps: 2, VocabSize: 50}, nil)
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("err = %v, want ErrCancelled", err)
	}
	if len(records) != 1 || records[0].TestName() != "pp4" {
		t.Errorf("finished records %+v, want the pp4 row", records)
	}
}

func TestRunRejectsBadConfigAndSurfacesEvalErrors(t *testing.T) {
	for _, cfg := range []Config{{NPrompt: 1, Reps: 0, VocabSize: 10}, {Reps: 1, VocabSize: 10}, {NPrompt: 1, Reps: 1, VocabSize: 2}} {
		if _, err := Run(context.Background(), &countingEvaluator{}, cfg, nil); err == nil {
			t.Errorf("Run(%+v) accepted a bad config", cfg)
		}
	}
	_, err := Run(context.Background(), &countingEvaluator{failOnCall: 2}, Config{NPrompt: 2, Reps: 2, VocabSize: 10}, nil)
	if err == nil || !strings.Contains(err.Error(), "device lost") || errors.Is(err, ErrCancelled) {
		t.Errorf("eval failure surfaced as %v", err)
	}
}

func TestWriteFormats(t *testing.T) {
	rec := Record{ModelType: "llama 260K Q8_0", ModelSize: 1185376, ModelParams: 260000, Backends: "Vulkan", Placement: "resident",
		NPrompt: 512, Summary: Summarize([]int64{1e8, 1e8}, 512), Tool: "vkllm"}
	tests := []struct {
		format string
		want   []string
	}{
		{"md", []string{"| model", "t/s |", "1.13 MiB", "260.00 K", "resident", "pp512", "5120.00 ± 0.00"}},
		{"json", []string{`"avg_ts": 5120`, `"samples_ns": [`, `"n_prompt": 512`}},
		{"jsonl", []string{`"model_type":"llama 260K Q8_0"`}},
		{"csv", []string{"build_commit,build_number", "5120.000000"}},
		{"sql", []string{"CREATE TABLE IF NOT EXISTS test", "INSERT INTO test"}},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		if err := Write(&buf, tc.format, []Record{rec}); err != nil {
			t.Fatalf("Write %s: %v", tc.format, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s output lacks %q:\n%s", tc.format, w, buf.String())
			}
		}
	}
	// under the table, how its tg rows' steps ran; a table without tg rows says nothing of it
	tg := rec
	tg.NPrompt, tg.NGen, tg.Decode = 0, 128, DecodeGreedyChained
	var md bytes.Buffer
	if err := Write(&md, "md", []Record{rec, tg}); err != nil || !strings.Contains(md.String(), "tg (greedy-chained): a greedy generation") {
		t.Errorf("md with a chained tg row lacks its decode note (%v):\n%s", err, md.String())
	}
	md.Reset()
	if err := Write(&md, "md", []Record{rec}); err != nil || strings.Contains(md.String(), "tg (") {
		t.Errorf("md with only a pp row has a decode note (%v):\n%s", err, md.String())
	}
	if err := Write(&bytes.Buffer{}, "yaml", nil); err == nil {
		t.Error("unknown format accepted")
	}
	// A JSON row we wrote parses back as llama-bench input (same field names).
	var buf bytes.Buffer
	_ = Write(&buf, "json", []Record{rec})
	back, err := ParseLlamaBench(&buf)
	if err != nil || back[0].AvgTs != rec.AvgTs || back[0].Tool != "vkllm" {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// warmingEvaluator takes times[i] for its i-th call (the last one for every later call).
type warmingEvaluator struct {
	times []time.Duration
	calls int
}

func (w *warmingEvaluator) Eval(tokens []int, pos int, _ bool) ([]float32, error) {
	time.Sleep(w.times[min(w.calls, len(w.times)-1)])
	w.calls++
	return []float32{0}, nil
}

func (w *warmingEvaluator) Reset() {}

// With SteadyWarmup the warm-up runs go on while a short run still speeds up by more than 10%
// (at most five; the first, which creates a GPU's pipelines, is always followed by a second),
// and none of them is a sample; without it there is one, as llama-bench's.
func TestSteadyWarmupWarmsUntilRunsAreSteady(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		steady bool
		times  []time.Duration
		want   int
	}{
		{"llama-bench's one", false, []time.Duration{200 * ms, 100 * ms, 50 * ms}, 1},
		{"until steady", true, []time.Duration{200 * ms, 100 * ms, 50 * ms}, 4},
		{"steady at once", true, []time.Duration{50 * ms}, 2},
		{"at most five", true, []time.Duration{300 * ms, 200 * ms, 120 * ms, 80 * ms, 50 * ms, 25 * ms}, 5},
		{"a long run warms by itself", true, []time.Duration{1100 * ms, 1100 * ms, 50 * ms}, 2},
		{"a long first run is the pipelines' creation", true, []time.Duration{1100 * ms, 50 * ms}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &warmingEvaluator{times: tc.times}
			warmups := 0
			records, err := Run(context.Background(), ev, Config{NPrompt: 8, Reps: 2, VocabSize: 100, Seed: 1, SteadyWarmup: tc.steady}, func(p Progress) {
				if p.Phase == PhaseWarmup {
					warmups++
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if r := records[0]; r.Warmup != tc.want || warmups != tc.want || len(r.SamplesNs) != 2 || ev.calls != tc.want+2 {
				t.Errorf("%d warm-ups recorded, %d reported, %d samples, %d calls; want %d warm-ups and 2 samples", r.Warmup, warmups, len(r.SamplesNs), ev.calls, tc.want)
			}
		})
	}
}

// greedyCountingEvaluator picks its own next tokens (as the resident Vulkan driver does).
type greedyCountingEvaluator struct {
	countingEvaluator
	greedy    []int // the token of each Greedy call
	greedyPos []int
}

// Greedy's argmax is a function of the token and position, so the bench's feeding is checkable.
func (g *greedyCountingEvaluator) Greedy(token, pos int) (int, error) {
	g.greedy = append(g.greedy, token)
	g.greedyPos = append(g.greedyPos, pos)
	return 40 + (token*7+pos)%50, nil
}

// chainingCountingEvaluator says it queues each greedy step behind the one before.
type chainingCountingEvaluator struct{ greedyCountingEvaluator }

func (*chainingCountingEvaluator) ChainsGreedy() bool { return true }

// On an evaluator that picks tokens on its device, tg is a greedy generation: each step takes
// the token the step before returned, at consecutive positions, with no Eval of its own; pp
// still evaluates the synthetic prompt. The tg record says how its steps ran.
func TestRunDecodesGreedilyOnADevicePickingItsTokens(t *testing.T) {
	ev := &greedyCountingEvaluator{}
	records, err := Run(context.Background(), ev, Config{NPrompt: 8, NGen: 5, Reps: 2, VocabSize: 100, Seed: 3}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(records) != 2 || records[0].Decode != "" || records[1].Decode != DecodeGreedy {
		t.Fatalf("records %+v: want pp without a decode mode, tg %q", records, DecodeGreedy)
	}
	chained, err := Run(context.Background(), &chainingCountingEvaluator{}, Config{NGen: 3, Reps: 1, VocabSize: 100, Seed: 3}, nil)
	if err != nil || len(chained) != 1 || chained[0].Decode != DecodeGreedyChained {
		t.Fatalf("on a chaining evaluator: %+v, %v; want one tg record %q", chained, err, DecodeGreedyChained)
	}
	if len(ev.calls) != 3 {
		t.Fatalf("%d Eval calls, want the 3 pp runs only", len(ev.calls))
	}
	if len(ev.greedy) != 15 {
		t.Fatalf("%d Greedy calls, want 3 runs of 5", len(ev.greedy))
	}
	for i, tok := range ev.greedy {
		if ev.greedyPos[i] != i%5 {
			t.Errorf("step %d at position %d, want %d", i, ev.greedyPos[i], i%5)
		}
		if i%5 == 0 {
			if tok < firstToken || tok >= 100 {
				t.Errorf("run %d starts from token %d, outside the synthetic range", i/5, tok)
			}
			continue
		}
		if want := 40 + (ev.greedy[i-1]*7+ev.greedyPos[i-1])%50; tok != want {
			t.Errorf("step %d took token %d, the step before returned %d", i, tok, want)
		}
	}
}
