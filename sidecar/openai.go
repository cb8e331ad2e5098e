package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/sample"
)

// The OpenAI wire format, as much of it as a local single-model server needs.

// chatMessage accepts content as a string or as an array of {type: "text", text} parts.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func (m chatMessage) text() (string, error) {
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return "", fmt.Errorf("message content is neither a string nor an array of text parts: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("message content part of type %q is not supported (only text)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// stringList accepts a string or an array of strings (OpenAI's stop and prompt).
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = []string{s}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a string or an array of strings")
	}
	*l = many
	return nil
}

// samplingFields are shared by chat and text completions; pointers tell "absent" from zero.
type samplingFields struct {
	Model               string     `json:"model"`
	Stream              bool       `json:"stream"`
	MaxTokens           *int       `json:"max_tokens"`
	MaxCompletionTokens *int       `json:"max_completion_tokens"`
	Temperature         *float32   `json:"temperature"`
	TopP                *float32   `json:"top_p"`
	TopK                *int       `json:"top_k"`
	MinP                *float32   `json:"min_p"`
	Seed                *int64     `json:"seed"`
	RepeatPenalty       *float32   `json:"repeat_penalty"`
	RepeatLastN         *int       `json:"repeat_last_n"`
	Stop                stringList `json:"stop"`
	N                   *int       `json:"n"`
}

// request turns the fields into an engine request. An absent temperature is 1, as in OpenAI's API.
func (f samplingFields) request() (engine.GenerateRequest, error) {
	var req engine.GenerateRequest
	if f.N != nil && *f.N != 1 {
		return req, fmt.Errorf("n=%d: only one choice per request is supported", *f.N)
	}
	p := sample.Params{Temperature: 1}
	if f.Temperature != nil {
		p.Temperature = *f.Temperature
	}
	if f.TopP != nil {
		p.TopP = *f.TopP
	}
	if f.TopK != nil {
		p.TopK = *f.TopK
	}
	if f.MinP != nil {
		p.MinP = *f.MinP
	}
	if f.Seed != nil {
		p.Seed = uint64(*f.Seed)
	}
	if f.RepeatPenalty != nil {
		p.RepeatPenalty = *f.RepeatPenalty
	}
	if f.RepeatLastN != nil {
		p.RepeatLastN = *f.RepeatLastN
	}
	if err := p.Validate(); err != nil {
		return req, err
	}
	req.Sampling = p
	switch {
	case f.MaxCompletionTokens != nil:
		req.MaxTokens = *f.MaxCompletionTokens
	case f.MaxTokens != nil:
		req.MaxTokens = *f.MaxTokens
	}
	if req.MaxTokens < 0 {
		return req, fmt.Errorf("max_tokens %d is negative: want 0 (until the end of the context) or more", req.MaxTokens)
	}
	for _, s := range f.Stop {
		if s != "" {
			req.Stop = append(req.Stop, s)
		}
	}
	return req, nil
}

type chatRequest struct {
	samplingFields
	Messages []chatMessage `json:"messages"`
}

type completionRequest struct {
	samplingFields
	Prompt stringList `json:"prompt"`
}

// Usage is OpenAI's token accounting.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Timings are llama.cpp server's timing fields plus time to first token.
type Timings struct {
	PromptN            int     `json:"prompt_n"`
	PromptMs           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMs        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	TTFTMs             float64 `json:"ttft_ms"`
}

func timingsOf(t engine.Timings) Timings {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return Timings{
		PromptN: t.PromptTokens, PromptMs: ms(t.Prompt), PromptPerSecond: t.PromptPerSec,
		PredictedN: t.GeneratedTokens, PredictedMs: ms(t.Generation), PredictedPerSecond: t.GenPerSec,
		TTFTMs: ms(t.TimeToFirst),
	}
}

// engineTimings is the inverse of timingsOf, for the supervisor.
func (t Timings) engineTimings() engine.Timings {
	d := func(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
	return engine.Timings{
		PromptTokens: t.PromptN, Prompt: d(t.PromptMs), PromptPerSec: t.PromptPerSecond,
		GeneratedTokens: t.PredictedN, Generation: d(t.PredictedMs), GenPerSec: t.PredictedPerSecond,
		TimeToFirst: d(t.TTFTMs),
	}
}

func finishReason(r engine.StopReason) string {
	if r == engine.StopLength {
		return "length"
	}
	return "stop"
}

type chatDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content,omitempty"`
}

type chatChoice struct {
	Index        int        `json:"index"`
	Message      *chatDelta `json:"message,omitempty"`
	Delta        *chatDelta `json:"delta,omitempty"`
	Text         *string    `json:"text,omitempty"`
	FinishReason *string    `json:"finish_reason"`
	Logprobs     *struct{}  `json:"logprobs"`
}

// chatResponse is a chat.completion, chat.completion.chunk or text_completion object.
type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []chatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
	Timings           *Timings     `json:"timings,omitempty"`
	StopReason        string       `json:"vkllm_stop_reason,omitempty"`
}

var requestSeq atomic.Int64

func (s *server) handleModels(w http.ResponseWriter, r *http.Request) {
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []entry `json:"data"`
	}{Object: "list", Data: []entry{}}
	if m, err := s.current(); err == nil {
		list.Data = append(list.Data, entry{ID: m.Info().Name, Object: "model", Created: time.Now().Unix(), OwnedBy: "vkllm"})
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) handleChat(w http.ResponseWriter, r *http.Request) {
	var body chatRequest
	if err := s.decodePromptBody(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	req, err := body.request()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if len(body.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "messages is empty: send at least one message")
		return
	}
	for i, m := range body.Messages {
		text, err := m.text()
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("messages[%d]: %v", i, err))
			return
		}
		switch m.Role {
		case "system", "user", "assistant":
		case "developer":
			m.Role = "system"
		default:
			writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("messages[%d]: role %q is not system, user or assistant", i, m.Role))
			return
		}
		req.Messages = append(req.Messages, engine.Message{Role: m.Role, Content: text})
	}
	s.generate(w, r, req, body.Stream, true)
}

func (s *server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var body completionRequest
	if err := s.decodePromptBody(r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	req, err := body.request()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if len(body.Prompt) != 1 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("prompt has %d entries: send exactly one string", len(body.Prompt)))
		return
	}
	req.Prompt = body.Prompt[0]
	s.generate(w, r, req, body.Stream, false)
}

// promptBounded is a loaded model that knows the most bytes of text a prompt fitting its
// context can have (-1: no bound); *engine.Engine is one.
type promptBounded interface {
	MaxPromptBytes() int64
}

// promptPreparer is a loaded model that can render and tokenize a request before its turn;
// *engine.Engine is one.
type promptPreparer interface {
	PromptTokens(ctx context.Context, req engine.GenerateRequest) ([]int, error)
}

// jsonPerTextByte is how many bytes of JSON one byte of text may take (a control character
// escaped as \u00XX), and jsonOverhead the room left for the rest of a request.
const (
	jsonPerTextByte = 6
	jsonOverhead    = 1 << 20
)

// decodePromptBody decodes a chat or completion body. A body too large to carry a prompt that
// fits the loaded model's context is refused from its Content-Length before it is read, or as
// soon as reading passes the bound; the error gives the numbers.
func (s *server) decodePromptBody(r *http.Request, v any) error {
	limit := int64(maxBody)
	var why string
	if m, err := s.current(); err == nil {
		if b, ok := m.(promptBounded); ok {
			if text := b.MaxPromptBytes(); text >= 0 && jsonPerTextByte*text+jsonOverhead < limit {
				limit = jsonPerTextByte*text + jsonOverhead
				why = fmt.Sprintf("a prompt that fits the context of %d tokens has at most %d bytes of text, %d bytes as a request", m.Info().Context, text, limit)
			}
		}
	}
	if r.ContentLength > limit {
		if why == "" {
			return fmt.Errorf("request body of %d bytes is over the limit of %d bytes", r.ContentLength, limit)
		}
		return fmt.Errorf("request body of %d bytes cannot fit: %s; shorten the prompt or load the model with a larger context (--ctx)", r.ContentLength, why)
	}
	if err := decodeBodyMax(r, v, limit); err != nil {
		if why != "" && strings.Contains(err.Error(), "over its limit") {
			return fmt.Errorf("request body is over %d bytes: %s; shorten the prompt or load the model with a larger context (--ctx)", limit, why)
		}
		return err
	}
	return nil
}

// generate runs one request in its turn. The prompt is rendered and tokenized before the turn
// (a prompt that cannot fit is a 400 without waiting, and other chats do not wait for it). The
// request context ends when the client disconnects, which stops the tokenizing, takes the
// request out of the queue or cancels the generation.
func (s *server) generate(w http.ResponseWriter, r *http.Request, req engine.GenerateRequest, stream, chat bool) {
	ctx := r.Context()
	prepared, _ := s.current()
	if p, ok := prepared.(promptPreparer); ok {
		ids, err := p.PromptTokens(ctx, req)
		switch {
		case err == nil:
			req.PromptTokens = ids
		case ctx.Err() != nil:
			return // the client left
		default:
			writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			return
		}
	}
	if err := s.queue.acquire(ctx); err != nil {
		return // the client left while waiting
	}
	defer s.queue.release()
	m, err := s.current()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", err.Error())
		return
	}
	if m != prepared {
		req.PromptTokens = nil // another model was loaded meanwhile: it tokenizes for itself
	}
	info := m.Info()
	id := fmt.Sprintf("vkllm-%d-%d", time.Now().Unix(), requestSeq.Add(1))
	obj := "text_completion"
	if chat {
		obj = "chat.completion"
	}
	base := chatResponse{ID: id, Object: obj, Created: time.Now().Unix(), Model: info.Name}
	if !stream {
		res, err := m.Generate(ctx, req, func(engine.Piece) error { return nil })
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, engine.ErrPromptTooLong):
				writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
			default:
				writeError(w, http.StatusInternalServerError, "server_error", fmt.Sprintf("generate: %v", err))
			}
			return
		}
		out := base
		fr := finishReason(res.Stop)
		choice := chatChoice{FinishReason: &fr}
		if chat {
			choice.Message = &chatDelta{Role: "assistant", Content: res.Text}
		} else {
			choice.Text = &res.Text
		}
		out.Choices = []chatChoice{choice}
		out.Usage = usageOf(res)
		t := timingsOf(res.Timings)
		out.Timings, out.StopReason = &t, string(res.Stop)
		writeJSON(w, http.StatusOK, out)
		return
	}

	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return fmt.Errorf("client went away: %w", err)
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	if chat {
		base.Object = "chat.completion.chunk"
	}
	chunk := func(text string) chatResponse {
		c := base
		if chat {
			c.Choices = []chatChoice{{Delta: &chatDelta{Content: text}}}
		} else {
			t := text
			c.Choices = []chatChoice{{Text: &t}}
		}
		return c
	}
	if chat {
		first := base
		first.Choices = []chatChoice{{Delta: &chatDelta{Role: "assistant"}}}
		if err := send(first); err != nil {
			return
		}
	}
	res, err := m.Generate(ctx, req, func(p engine.Piece) error {
		if p.Text == "" {
			return nil
		}
		return send(chunk(p.Text))
	})
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			var e apiError
			e.Error.Message, e.Error.Type = fmt.Sprintf("generate: %v", err), "server_error"
			send(e)
		}
		slog.Debug("generation ended early", "id", id, "err", err)
		return
	}
	last := chunk("")
	fr := finishReason(res.Stop)
	if chat {
		last.Choices = []chatChoice{{Delta: &chatDelta{}, FinishReason: &fr}}
	} else {
		last.Choices[0].FinishReason = &fr
	}
	last.Usage = usageOf(res)
	t := timingsOf(res.Timings)
	last.Timings, last.StopReason = &t, string(res.Stop)
	if send(last) != nil {
		return
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

func usageOf(res engine.Result) *Usage {
	p, c := res.Timings.PromptTokens, res.Timings.GeneratedTokens
	if p == 0 {
		p = len(res.PromptTokens)
	}
	if c == 0 {
		c = len(res.Generated)
	}
	return &Usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}
