package main

import (
	"context"
	"log/slog"

	"github.com/vkllm/vkllm/app"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sidecar"
)

// optionsEngine is the sidecar engine with each model's saved load options: every load of a
// model (opening it, the library, the start-up model) uses the options saved for it, and the
// model it reports says a CPU the options chose as the reason it runs there.
type optionsEngine struct {
	sidecarEngine
	opts app.LoadOptionsStore
}

func (e optionsEngine) LoadModel(ctx context.Context, path string) (engine.ModelInfo, error) {
	info, err := e.LoadModelWith(ctx, app.StoredEngineLoad(ctx, e.opts, path))
	if err != nil {
		return info, err
	}
	o, _ := app.StoredLoadOptions(ctx, e.opts, info.Path)
	return app.ExplainPlacement(info, o), nil
}

func (e optionsEngine) Model(ctx context.Context) (engine.ModelInfo, error) {
	info, err := e.sidecarEngine.Model(ctx)
	if err != nil {
		return info, err
	}
	o, _ := app.StoredLoadOptions(ctx, e.opts, info.Path)
	return app.ExplainPlacement(info, o), nil
}

// LoadModelWith makes the engine an app.OptionsLoader.
func (e optionsEngine) LoadModelWith(ctx context.Context, l app.EngineLoad) (engine.ModelInfo, error) {
	return e.sup.LoadModelWith(ctx, sidecar.LoadRequest{Path: l.Path, Ctx: l.Ctx, Backend: l.Backend, Device: l.Device, KV: l.KV})
}

// loadStartupOptions reloads the start-up model with the options saved for it, if any (the
// sidecar started it with its defaults); a reload that fails leaves it running as it started.
func loadStartupOptions(ctx context.Context, e optionsEngine, path string) {
	if _, saved := app.StoredLoadOptions(ctx, e.opts, path); !saved {
		return
	}
	if _, err := e.LoadModel(ctx, path); err != nil {
		slog.Warn("reload the start-up model with its saved load options; it runs with the defaults", "path", path, "err", err)
	}
}

var _ app.OptionsLoader = optionsEngine{}
