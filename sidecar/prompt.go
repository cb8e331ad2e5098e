package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/vkllm/vkllm/engine"
)

// PromptCount is the body of POST /vkllm/tokenize's answer: how many tokens a chat renders to
// with the loaded model's template, and the context it has to fit. TooLong says the prompt
// passed the context before it was counted in full; Tokens is then a lower bound.
type PromptCount struct {
	Tokens  int  `json:"tokens"`
	Context int  `json:"context"`
	TooLong bool `json:"too_long"`
}

// handleTokenize renders and counts a chat as /v1/chat/completions would, without generating:
// the app fits a long conversation into the context with it before it asks for a reply. A chat
// that does not fit is an answer (too_long), not an error.
func (s *server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages []engine.Message `json:"messages"`
	}
	if err := decodeBody(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if len(body.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "tokenize: no messages given; send at least one message")
		return
	}
	m, err := s.current()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", err.Error())
		return
	}
	p, ok := m.(promptPreparer)
	if !ok {
		writeError(w, http.StatusNotImplemented, "server_error", "tokenize: the loaded model cannot count prompt tokens")
		return
	}
	ids, err := p.PromptTokens(r.Context(), engine.GenerateRequest{Messages: body.Messages})
	var tooLong *engine.PromptTooLongError
	switch {
	case errors.As(err, &tooLong):
		writeJSON(w, http.StatusOK, PromptCount{Tokens: tooLong.Tokens, Context: tooLong.Context, TooLong: true})
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("tokenize: %v", err))
	default:
		writeJSON(w, http.StatusOK, PromptCount{Tokens: len(ids), Context: m.Info().Context})
	}
}

// PromptTokens counts the tokens msgs render to with the loaded model (POST /vkllm/tokenize).
func (s *Supervisor) PromptTokens(ctx context.Context, msgs []engine.Message) (PromptCount, error) {
	var out PromptCount
	inst, err := s.current(ctx)
	if err != nil {
		return out, err
	}
	err = s.call(ctx, inst, http.MethodPost, "/vkllm/tokenize", map[string]any{"messages": msgs}, &out)
	return out, err
}
