package sidecar

import (
	"context"
	"errors"

	"github.com/vkllm/vkllm/engine"
)

// Model is what the server needs from a loaded model; *engine.Engine satisfies it, and the tests
// use a scripted fake.
type Model interface {
	Info() engine.ModelInfo
	Generate(ctx context.Context, req engine.GenerateRequest, onPiece func(engine.Piece) error) (engine.Result, error)
	Close() error
}

// LoadFunc loads a model; the server calls it for the startup model and for POST /vkllm/load.
type LoadFunc func(ctx context.Context, opts engine.LoadOptions) (Model, error)

// engineLoad loads with the real engine.
func engineLoad(ctx context.Context, opts engine.LoadOptions) (Model, error) {
	e, err := engine.Load(ctx, opts)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// enginePreflight reads a model file's header and hyperparameters without loading its weights, so
// a file that cannot load is refused while the current model still serves.
func enginePreflight(path string) error {
	if _, err := engine.TrainingContext(path); err != nil {
		if inner := errors.Unwrap(err); inner != nil {
			return inner // without TrainingContext's own "read training context" prefix
		}
		return err
	}
	return nil
}
