package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/sample"
	"github.com/vkllm/vkllm/store"
)

func init() {
	register("run", "generate text from a prompt and print prompt/eval speed", runRun)
}

// modelFlags are the flags every command that loads a model shares.
type modelFlags struct {
	path    string
	ctx     int
	threads int
	gpu     bool
	cpu     bool
	kv      string
}

func addModelFlags(fs *flag.FlagSet) *modelFlags {
	m := &modelFlags{}
	fs.StringVar(&m.path, "m", "", "GGUF model file (default: the embedded stories260K model)")
	fs.IntVar(&m.ctx, "ctx", 0, "context length (default: the model's own)")
	fs.IntVar(&m.threads, "threads", 0, "CPU threads (default: VKLLM_THREADS or all cores)")
	fs.BoolVar(&m.gpu, "gpu", false, "run on the GPU or fail")
	fs.BoolVar(&m.cpu, "cpu", false, "run on the CPU")
	fs.StringVar(&m.kv, "kv", "", "KV cache type: f16 (default) or f32 (with --cpu only)")
	return m
}

func (m *modelFlags) options() (engine.LoadOptions, error) {
	opts := engine.LoadOptions{Path: m.path, Context: m.ctx, Threads: m.threads, DeviceIndex: -1, Backend: engine.BackendAuto, KV: m.kv, StoredPinMB: store.StoredPinMB}
	switch {
	case m.gpu && m.cpu:
		return opts, fmt.Errorf("%w: --gpu and --cpu exclude each other", errUsage)
	case m.gpu:
		opts.Backend = engine.BackendGPU
	case m.cpu:
		opts.Backend = engine.BackendCPU
	}
	if m.ctx < 0 {
		return opts, fmt.Errorf("%w: --ctx must not be negative", errUsage)
	}
	return opts, nil
}

func addSamplingFlags(fs *flag.FlagSet, p *sample.Params, temp float64) {
	fs.Func("temp", fmt.Sprintf("temperature; 0 = greedy (default %g)", temp), floatFlag(&p.Temperature))
	p.Temperature = float32(temp)
	fs.IntVar(&p.TopK, "top-k", 0, "keep the K most likely tokens (0 = off)")
	fs.Func("top-p", "keep the smallest set of tokens reaching this probability mass (0 or 1 = off)", floatFlag(&p.TopP))
	fs.Func("min-p", "drop tokens below this fraction of the most likely one's probability (0 = off)", floatFlag(&p.MinP))
	fs.Func("repeat-penalty", "penalty for recently seen tokens (1 = off)", floatFlag(&p.RepeatPenalty))
	fs.IntVar(&p.RepeatLastN, "repeat-last-n", 64, "how many recent tokens the repeat penalty looks at")
	fs.Uint64Var(&p.Seed, "seed", 0, "random seed (0 = from the clock)")
}

func floatFlag(dst *float32) func(string) error {
	return func(s string) error {
		var v float64
		if _, err := fmt.Sscan(s, &v); err != nil {
			return fmt.Errorf("not a number: %q", s)
		}
		*dst = float32(v)
		return nil
	}
}

func runRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	mf := addModelFlags(fs)
	prompt := fs.String("p", "", "prompt text")
	n := fs.Int("n", 128, "tokens to generate (0 = until end of text or the context is full)")
	asJSON := fs.Bool("json", false, "print one JSON object: prompt_tokens, generated, text, timings")
	var stops multiFlag
	fs.Var(&stops, "stop", "stop before this string (repeatable)")
	var sp sample.Params
	addSamplingFlags(fs, &sp, 0)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *prompt == "" && fs.NArg() > 0 {
		*prompt = strings.Join(fs.Args(), " ")
	}
	if *prompt == "" {
		return fmt.Errorf("%w: give a prompt with -p TEXT", errUsage)
	}
	if *n < 0 {
		return fmt.Errorf("%w: -n must not be negative", errUsage)
	}
	opts, err := mf.options()
	if err != nil {
		return err
	}
	eng, err := engine.Load(ctx, opts)
	if err != nil {
		return err
	}
	defer eng.Close()

	req := engine.GenerateRequest{Prompt: *prompt, MaxTokens: *n, Sampling: sp, Stop: stops}
	var onPiece func(engine.Piece) error
	if !*asJSON {
		fmt.Print(*prompt)
		onPiece = func(p engine.Piece) error {
			_, err := os.Stdout.WriteString(p.Text)
			return err
		}
	}
	res, err := eng.Generate(ctx, req, onPiece)
	if err != nil {
		if !*asJSON {
			fmt.Println() // the error starts on a line of its own, after the text streamed so far
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		return enc.Encode(res)
	}
	fmt.Println()
	printTimings(res.Timings, eng.Info())
	return nil
}

func printTimings(t engine.Timings, info engine.ModelInfo) {
	fmt.Fprintf(os.Stderr, "prompt: %d tokens in %.1f ms, %.1f tok/s | eval: %d tokens, %.1f tok/s | first token after %.1f ms | %s on %s\n",
		t.PromptTokens, float64(t.Prompt.Microseconds())/1000, t.PromptPerSec,
		t.GeneratedTokens, t.GenPerSec, float64(t.TimeToFirst.Microseconds())/1000, info.Name, info.Backend)
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
