package main

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/vkllm/vkllm/app"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sidecar"
)

// optionsEngine is the sidecar engine with each model's saved load options: every load of a
// model (opening it, the library, the start-up model) uses the options saved for it, and the
// model it reports says a CPU the options chose as the reason it runs there.
type optionsEngine struct {
	sidecarEngine
	opts  app.LoadOptionsStore
	place *app.PlacementExplainer // says in the app's words why a model runs on the CPU
}

func (e optionsEngine) LoadModel(ctx context.Context, path string) (engine.ModelInfo, error) {
	info, err := e.LoadModelWith(ctx, app.StoredEngineLoad(ctx, e.opts, path))
	if err != nil {
		return info, err
	}
	o, _ := app.StoredLoadOptions(ctx, e.opts, info.Path)
	return e.place.Explain(ctx, info, o), nil
}

func (e optionsEngine) Model(ctx context.Context) (engine.ModelInfo, error) {
	info, err := e.sidecarEngine.Model(ctx)
	if err != nil {
		return info, err
	}
	o, _ := app.StoredLoadOptions(ctx, e.opts, info.Path)
	return e.place.Explain(ctx, info, o), nil
}

// LoadModelWith makes the engine an app.OptionsLoader.
func (e optionsEngine) LoadModelWith(ctx context.Context, l app.EngineLoad) (engine.ModelInfo, error) {
	return e.sup.LoadModelWith(ctx, sidecar.LoadRequest{Path: l.Path, Ctx: l.Ctx, Backend: l.Backend, Device: l.Device, KV: l.KV})
}

// serveArgs are the engine's `serve` flags for the start-up load l (serveOptions reads them), so
// the engine loads the start-up model once, with its saved options, and again so after a crash.
func serveArgs(l app.EngineLoad) []string {
	args := []string{"serve"}
	if l.Path != "" {
		args = append(args, "-m", l.Path)
	}
	if l.Ctx > 0 {
		args = append(args, "-c", strconv.Itoa(l.Ctx))
	}
	switch engine.Backend(l.Backend) {
	case engine.BackendCPU:
		args = append(args, "--cpu")
	case engine.BackendGPU:
		args = append(args, "--gpu")
	}
	if l.Device != nil {
		args = append(args, "--device", strconv.Itoa(*l.Device))
	}
	if l.KV != "" {
		args = append(args, "--kv", l.KV)
	}
	return args
}

// startWithDefaultsIfRefused loads the start-up model on the default device and cache type when
// the engine refused it with its saved options (saved before a check refused them, a GPU gone):
// the model still opens, and the saved options stay for when they fit again.
func startWithDefaultsIfRefused(ctx context.Context, e optionsEngine, l app.EngineLoad) {
	if _, err := e.sidecarEngine.Model(ctx); err == nil {
		return
	} else if _, saved := app.StoredLoadOptions(ctx, e.opts, l.Path); !saved {
		return
	} else {
		slog.Warn("the start-up model did not load with its saved load options; loading it with the defaults", "path", l.Path, "err", err)
	}
	// A field left out takes the serve flag, so the defaults are spelled out (a context of 0 is
	// "left out": the saved context stays, still capped by the plan).
	if _, err := e.LoadModelWith(ctx, app.EngineLoad{Path: l.Path, Backend: string(engine.BackendAuto), KV: "f16"}); err != nil {
		slog.Warn("load the start-up model with the defaults", "path", l.Path, "err", err)
	}
}

var _ app.OptionsLoader = optionsEngine{}
