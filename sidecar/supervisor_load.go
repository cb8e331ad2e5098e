package sidecar

import (
	"context"
	"net/http"

	"github.com/vkllm/vkllm/engine"
)

// LoadModelWith switches the engine to req's model with req's load options (context, backend,
// device, KV cache type); after a restart the engine loads it again with the same options. A
// load that fails leaves the engine serving the model it had.
func (s *Supervisor) LoadModelWith(ctx context.Context, req LoadRequest) (engine.ModelInfo, error) {
	if err := req.check(); err != nil {
		return engine.ModelInfo{}, err
	}
	inst, err := s.current(ctx)
	if err != nil {
		return engine.ModelInfo{}, err
	}
	var info engine.ModelInfo
	if err := s.call(ctx, inst, http.MethodPost, "/vkllm/load", req, &info); err != nil {
		return engine.ModelInfo{}, err
	}
	s.mu.Lock()
	path := req.Path
	s.modelPath, s.loadReq, s.unloaded = &path, &req, false
	s.mu.Unlock()
	return info, nil
}
