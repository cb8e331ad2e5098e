package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/vkllm/vkllm/app"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/engine/config"
	// The Vulkan resident driver registers itself with engine.Load, as in the CLI: the sidecar
	// (`vkllm-app serve`) runs on the GPU when the plan arms. main_test.go fails without it.
	_ "github.com/vkllm/vkllm/engine/vulkan/backend"
	"github.com/vkllm/vkllm/sidecar"
	"github.com/vkllm/vkllm/store"
)

// startServices opens the store, spawns the engine sidecar (this same binary, `serve`) and builds
// the app services over them. The returned function stops the sidecar and closes the store.
func startServices(ctx context.Context, model string, em app.Emitter) (services, func(), error) {
	st, err := store.Open("")
	if err != nil {
		return services{}, nil, fmt.Errorf("open the store: %w", err)
	}
	if n, err := st.InterruptStreaming(ctx); err != nil {
		slog.Warn("mark replies left streaming as interrupted", "err", err)
	} else if n > 0 {
		slog.Info("replies left streaming by the last run marked interrupted", "count", n)
	}
	dataDir, err := store.DefaultDir()
	if err != nil {
		st.Close()
		return services{}, nil, err
	}
	bin := config.SidecarBinary.String()
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			st.Close()
			return services{}, nil, fmt.Errorf("find this executable to start the engine: %w (set VKLLM_SIDECAR to a vkllm binary)", err)
		}
	}
	// The engine starts with the start-up model's saved load options as its serve flags, so it
	// loads the model once, already as the user chose it.
	startLoad := app.StoredEngineLoad(ctx, st, model)
	sup, err := sidecar.Start(ctx, sidecar.SupervisorOptions{
		Binary:  bin,
		Args:    serveArgs(startLoad),
		DataDir: dataDir,
		OnEvent: func(ev sidecar.Event) { app.EmitEngineEvent(em, ev.Kind, ev.Reason, ev.AtMs) },
	})
	if err != nil {
		st.Close()
		return services{}, nil, fmt.Errorf("start the engine: %w", err)
	}
	sa := storeAdapter{st}
	closeAll := func() {
		if err := sup.Close(); err != nil {
			slog.Warn("stop the engine", "err", err)
		}
		if err := st.Close(); err != nil {
			slog.Warn("close the store", "err", err)
		}
	}
	eng := optionsEngine{sidecarEngine{sup}, st, app.NewPlacementExplainer(sidecarEngine{sup}.Plan)}
	startWithDefaultsIfRefused(ctx, eng, startLoad)
	svc := newServices(ctx, eng, sa, sa, st, em)
	svc.LoadOptions = app.NewLoadOptionsService(ctx, eng, eng, st, em)
	wireLibrary(ctx, &svc, sa, em)
	return svc, closeAll, nil
}

// sidecarEngine lets the sidecar supervisor serve as the app's Engine.
type sidecarEngine struct{ sup *sidecar.Supervisor }

func (e sidecarEngine) ChatStream(ctx context.Context, req app.ChatRequest, onDelta func(string) error) (app.ChatResult, error) {
	res, err := e.sup.ChatStream(ctx, sidecar.ChatRequest{Messages: req.Messages, MaxTokens: req.MaxTokens, Sampling: req.Sampling, Stop: req.Stop}, onDelta)
	if errors.Is(err, sidecar.ErrEngineDied) {
		err = fmt.Errorf("%w: %w", app.ErrEngineDied, err)
	}
	return app.ChatResult{Text: res.Text, Stop: res.Stop, Timings: res.Timings}, err
}

func (e sidecarEngine) Model(ctx context.Context) (engine.ModelInfo, error) { return e.sup.Model(ctx) }

func (e sidecarEngine) LoadModel(ctx context.Context, path string) (engine.ModelInfo, error) {
	return e.sup.LoadModel(ctx, path)
}

func (e sidecarEngine) Devices(ctx context.Context) (json.RawMessage, error) {
	return e.sup.Devices(ctx)
}

func (e sidecarEngine) Plan(ctx context.Context, req app.PlanRequest) (json.RawMessage, error) {
	return e.sup.Plan(ctx, req)
}

func (e sidecarEngine) PromptTokens(ctx context.Context, msgs []engine.Message) (app.PromptCount, error) {
	c, err := e.sup.PromptTokens(ctx, msgs)
	return app.PromptCount{Tokens: c.Tokens, Context: c.Context, TooLong: c.TooLong}, err
}

// Bench runs the engine's bench on the loaded model. The target arrives as the run's first event
// (bench:target), so it is known even when a cancelled run's last event is lost with the request.
func (e sidecarEngine) Bench(ctx context.Context, s app.BenchSettings, onProgress func(bench.Progress)) (app.BenchOutcome, error) {
	np, ng := s.NPrompt, s.NGen
	var out app.BenchOutcome
	records, err := e.sup.Bench(ctx, sidecar.BenchRequest{NPrompt: &np, NGen: &ng, Reps: s.Reps}, func(ev sidecar.BenchEvent) {
		if ev.Target != nil {
			out.Target = ev.Target
		}
		if ev.Progress != nil {
			onProgress(*ev.Progress)
		}
	})
	out.Records = records
	return out, err
}

// serveSidecar is `vkllm-app serve`: the engine process the app spawns (the flags of `vkllm
// serve`, and --device).
func serveSidecar(ctx context.Context, args []string) error {
	opts, err := serveOptions(args)
	if err != nil {
		return err
	}
	return sidecar.Serve(ctx, opts)
}

// serveOptions reads `serve`'s flags; serveArgs writes them.
func serveOptions(args []string) (sidecar.ServeOptions, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	model := fs.String("m", "", "GGUF model file to load at start (default: the embedded model)")
	listen := fs.String("listen", sidecar.DefaultListen, "address to listen on; port 0 picks a free one")
	tokenFile := fs.String("token-file", "", "file holding the bearer token; created with a random token (mode 0600) if missing")
	cpu := fs.Bool("cpu", false, "run on the CPU")
	gpu := fs.Bool("gpu", false, "run on the GPU (fail instead of falling back)")
	ctxLen := fs.Int("c", 0, "context length (default: the model's own, capped by the plan)")
	device := fs.Int("device", -1, "Vulkan device index (default: VKLLM_DEVICE, else the best)")
	kv := fs.String("kv", "", "KV cache type: f16 (default) or f32 (with --cpu only)")
	if err := fs.Parse(args); err != nil {
		return sidecar.ServeOptions{}, err
	}
	if fs.NArg() > 0 {
		return sidecar.ServeOptions{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *cpu && *gpu {
		return sidecar.ServeOptions{}, errors.New("--cpu and --gpu exclude each other")
	}
	backend := engine.BackendAuto
	if *cpu {
		backend = engine.BackendCPU
	} else if *gpu {
		backend = engine.BackendGPU
	}
	opts := sidecar.ServeOptions{ModelPath: *model, Listen: *listen, TokenFile: *tokenFile, Backend: backend, Context: *ctxLen, KV: *kv}
	if *device >= 0 {
		opts.Device = device
	}
	return opts, nil
}
