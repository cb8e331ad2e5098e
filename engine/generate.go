package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vkllm/vkllm/engine/chat"
	"github.com/vkllm/vkllm/engine/sample"
)

// ErrNoValidLogits is a forward pass whose logits pick no token: every one NaN or infinite,
// which a model's own arithmetic does not produce from sound weights.
var ErrNoValidLogits = errors.New("the model produced no valid logits (NaN or infinite everywhere): its weights are likely damaged, a corrupt or half-written file; download or convert it again, and if a good copy fails the same way, run it on the CPU to tell a GPU fault from the file")

// prefillChunk is how many prompt tokens are evaluated between cancellation checks, at least
// (a runner with prefill windows evaluates one window at a time: windowRunner).
const prefillChunk = 256

// windowRunner is a runner that evaluates a prompt in windows of PrefillWindow rows (the
// resident Vulkan driver: 512): a prompt evaluated in smaller pieces would cut its windows
// short, and its matrix products run best on whole windows.
type windowRunner interface {
	PrefillWindow() int
}

// greedyRunner is a runner that can pick the most likely next token itself: Greedy evaluates
// token at pos like Eval and returns the argmax of its logits, the lowest id on ties (the
// resident Vulkan driver's argmax on the device, 4 bytes read back).
type greedyRunner interface {
	Greedy(token, pos int) (int, error)
}

// SamplingRunner is a runner that can draw the next token itself (the resident Vulkan
// driver's sample_token): Sample evaluates token at pos and returns the token drawn from its
// logits under p with the uniform u, the step at pos+1 queued with uNext. The uniforms come
// from the request's sampler (Uniform), the k-th generated token taking its k-th draw as the
// host's Sample would, so a seed gives the same stream either way.
type SamplingRunner interface {
	SamplesOnDevice(p sample.Params) bool
	Sample(token, pos int, p sample.Params, u, uNext float64) (int, error)
}

// Tokenize returns the token ids of text. Special tokens written in text (e.g. "<|im_start|>")
// are parsed as such; addSpecial adds BOS/EOS as the model's metadata says.
func (e *Engine) Tokenize(text string, addSpecial bool) ([]int, error) {
	if e.tok == nil {
		return nil, errors.New("tokenize: the engine is closed")
	}
	return e.tok.Encode(text, addSpecial, true), nil
}

// Detokenize returns the text of ids.
func (e *Engine) Detokenize(ids []int) string { return e.tok.Decode(ids) }

// RenderChat renders messages with the model's chat template (or a plain fallback when the
// model has none, or its template fails on these messages), ending with the assistant's turn
// opened. A template that reaches a render limit (a recursive macro, a runaway loop, output
// beyond bounds, more than a second) is not used again for this loaded model: every later chat
// takes the fallback at once. A conversation that ends with a non-empty assistant message is
// rendered for that reply to be continued (renderContinuation) instead of a new turn. Cancelling
// ctx stops the render and returns its error.
func (e *Engine) RenderChat(ctx context.Context, msgs []Message) (string, error) {
	if n := len(msgs); n > 1 && msgs[n-1].Role == "assistant" && strings.TrimSpace(msgs[n-1].Content) != "" {
		if text, ok := e.renderContinuation(ctx, msgs); ok {
			return text, nil
		}
	}
	return e.renderTurn(ctx, msgs, true)
}

// renderContinuation renders a conversation that ends with a partial assistant reply so that
// the model continues that reply (as llama.cpp's server does with a final assistant message):
// the conversation without the generation prompt, cut right after the last occurrence of the
// reply's text, so the template's end-of-turn after it is dropped. ok is false when the
// rendered text does not hold the reply as written (a template that rewrites it): the caller
// then starts a new turn.
func (e *Engine) renderContinuation(ctx context.Context, msgs []Message) (string, bool) {
	text, err := e.renderTurn(ctx, msgs, false)
	if err != nil {
		return "", false
	}
	last := msgs[len(msgs)-1].Content
	for _, want := range []string{last, strings.TrimRightFunc(last, unicode.IsSpace), strings.TrimSpace(last)} {
		if i := strings.LastIndex(text, want); i >= 0 && want != "" {
			return text[:i+len(want)], true
		}
	}
	return "", false
}

// renderTurn renders msgs with the model's chat template (or the plain format), ending with the
// assistant's generation prompt when addGenerationPrompt.
func (e *Engine) renderTurn(ctx context.Context, msgs []Message, addGenerationPrompt bool) (string, error) {
	cm := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	if e.template == "" || e.templateOff.Load() {
		return chat.Fallback(cm, addGenerationPrompt), nil
	}
	bos, eos := "", ""
	if id := e.tok.BOS(); id >= 0 {
		bos = e.tok.Token(id)
	}
	if id := e.tok.EOS(); id >= 0 {
		eos = e.tok.Token(id)
	}
	s, err := chat.Render(ctx, e.template, cm, addGenerationPrompt, bos, eos)
	switch {
	case err == nil:
		return s, nil
	case ctx.Err() != nil:
		return "", fmt.Errorf("render chat template: %w", ctx.Err())
	case errors.Is(err, chat.ErrLimit):
		if !e.templateOff.Swap(true) {
			slog.Warn("the model file's chat template reached a render limit, so this model uses the plain chat format from now on; fix the file's tokenizer.chat_template or use another model file",
				"file", e.modelFile(), "err", err)
		}
	default:
		slog.Warn("chat template failed on this conversation; using the plain fallback format", "file", e.modelFile(), "err", err)
	}
	return chat.Fallback(cm, addGenerationPrompt), nil
}

// modelFile names the model file in log lines: its path, or the embedded model's name.
func (e *Engine) modelFile() string {
	if e.info.Path != "" {
		return e.info.Path
	}
	return e.info.Name
}

// Generate runs one completion or chat request, calling onPiece (which may be nil) for every
// generated token as it is produced. Text is held back while it could be the start of a stop
// string or ends inside a UTF-8 character; a final Piece with ID -1 releases held-back text when
// the generation ends without a stop string. Cancelling ctx ends the generation with
// Stop == StopCancelled and no error; an error from onPiece ends it and is returned with the
// partial Result.
func (e *Engine) Generate(ctx context.Context, req GenerateRequest, onPiece func(Piece) error) (Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runner == nil {
		return Result{}, errors.New("generate: the engine is closed")
	}
	start := time.Now()
	prompt := req.PromptTokens
	var err error
	if prompt == nil {
		if prompt, err = e.promptTokens(ctx, req); err != nil {
			return Result{}, fmt.Errorf("generate: %w", err)
		}
	}
	res := Result{PromptTokens: prompt}
	nctx := e.info.Context
	if len(prompt) == 0 {
		return res, errors.New("generate: the prompt has no tokens")
	}
	if len(prompt) >= nctx {
		return res, fmt.Errorf("generate: %w", &PromptTooLongError{Tokens: len(prompt), Context: nctx})
	}
	for _, id := range prompt {
		if id < 0 || id >= e.tok.VocabSize() {
			return res, fmt.Errorf("generate: prompt token %d is not in the vocabulary of %d tokens", id, e.tok.VocabSize())
		}
	}
	if onPiece == nil {
		onPiece = func(Piece) error { return nil }
	}

	// Prefill, reusing the cached prefix of a previous request (multi-turn chat).
	reuse := commonPrefix(e.cached, prompt)
	if reuse == len(prompt) {
		reuse-- // the last prompt token must be evaluated for its logits
	}
	e.cached = e.cached[:reuse]
	var logits []float32
	chunkLen := prefillChunk
	if w, ok := e.runner.(windowRunner); ok {
		chunkLen = max(chunkLen, w.PrefillWindow())
	}
	for pos := reuse; pos < len(prompt); pos += chunkLen {
		if ctx.Err() != nil {
			res.Stop = StopCancelled
			return res, nil
		}
		chunk := prompt[pos:min(pos+chunkLen, len(prompt))]
		if logits, err = e.runner.Eval(chunk, pos, false); err != nil {
			return res, fmt.Errorf("generate: evaluate prompt: %w", err)
		}
		e.cached = append(e.cached, chunk...)
	}
	promptDone := time.Now()
	res.Timings.PromptTokens = len(prompt) - reuse
	res.Timings.Prompt = promptDone.Sub(start)

	sampler := sample.New(req.Sampling)
	sampler.Accept(prompt...)
	out := newStream(req.Stop)
	var text strings.Builder
	var firstAt, lastAt time.Time
	emit := func(p Piece) error {
		text.WriteString(p.Text)
		return onPiece(p)
	}
	// A greedy request without a repetition penalty on a runner that takes the argmax on its
	// device (greedyRunner) reads back the next token, not the vocabulary's logits (half a
	// megabyte at 128k tokens, then a scan of them on the CPU) from the second token on.
	onDevice, _ := e.runner.(greedyRunner)
	if p := sampler.Params(); !p.Greedy() || (p.RepeatPenalty != 0 && p.RepeatPenalty != 1) {
		onDevice = nil
	}
	// A sampled request on a runner that draws on its device (SamplingRunner) reads back the
	// drawn token too, and its next step is already queued when the token comes back.
	drawer, _ := e.runner.(SamplingRunner)
	if drawer != nil && !drawer.SamplesOnDevice(sampler.Params()) {
		drawer = nil
	}
	var uAhead float64 // the uniform the step queued ahead draws with
	haveAhead := false
	next := -1 // the device's pick for the next token
	pos := len(prompt)
	for {
		id := next
		if next < 0 {
			id = sampler.Sample(logits)
		}
		lastAt = time.Now()
		if firstAt.IsZero() {
			firstAt = lastAt
			res.Timings.TimeToFirst = firstAt.Sub(start)
		}
		if id < 0 || id >= e.model.Hyper.VocabSize {
			res.Text = text.String()
			e.finishTimings(&res, firstAt, lastAt)
			return res, fmt.Errorf("generate: token at position %d: %w", pos, ErrNoValidLogits)
		}
		if e.tok.IsEOG(id) {
			res.Stop = StopEOS
			break
		}
		sampler.Accept(id)
		res.Generated = append(res.Generated, id)
		piece, stopped := out.push(e.tok.Piece(id))
		if err := emit(Piece{ID: id, Text: piece}); err != nil {
			res.Text = text.String()
			e.finishTimings(&res, firstAt, lastAt)
			return res, fmt.Errorf("generate: %w", err)
		}
		if stopped {
			res.Stop = StopString
			break
		}
		if (req.MaxTokens > 0 && len(res.Generated) >= req.MaxTokens) || pos >= nctx {
			res.Stop = StopLength
			break
		}
		if ctx.Err() != nil {
			res.Stop = StopCancelled
			break
		}
		switch {
		case onDevice != nil:
			next, err = onDevice.Greedy(id, pos)
		case drawer != nil:
			u := uAhead
			if !haveAhead {
				u = sampler.Uniform()
			}
			uAhead, haveAhead = sampler.Uniform(), true
			next, err = drawer.Sample(id, pos, sampler.Params(), u, uAhead)
			if err == nil && next < 0 {
				err = ErrNoValidLogits
			}
		default:
			logits, err = e.runner.Eval([]int{id}, pos, false)
		}
		if err != nil {
			res.Text = text.String()
			e.finishTimings(&res, firstAt, lastAt)
			return res, fmt.Errorf("generate: evaluate token %d at position %d: %w", id, pos, err)
		}
		e.cached = append(e.cached, id)
		pos++
	}
	if rest := out.flush(); rest != "" && res.Stop != StopString {
		if err := emit(Piece{ID: -1, Text: rest}); err != nil {
			res.Text = text.String()
			e.finishTimings(&res, firstAt, lastAt)
			return res, fmt.Errorf("generate: %w", err)
		}
	}
	res.Text = text.String()
	e.finishTimings(&res, firstAt, lastAt)
	return res, nil
}

func (e *Engine) finishTimings(res *Result, firstAt, lastAt time.Time) {
	t := &res.Timings
	t.GeneratedTokens = len(res.Generated)
	if t.Prompt > 0 {
		t.PromptPerSec = float64(t.PromptTokens) / t.Prompt.Seconds()
	}
	if !firstAt.IsZero() {
		t.Generation = lastAt.Sub(firstAt)
	}
	// the first token comes from the prompt's logits; each later one cost one decode step
	if steps := t.GeneratedTokens - 1; steps > 0 && t.Generation > 0 {
		t.GenPerSec = float64(steps) / t.Generation.Seconds()
	}
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// stream turns token bytes into text that is safe to show: it holds back an incomplete UTF-8
// sequence at the end and any tail that could be the start of a stop string, and finds stop
// strings across token boundaries.
type stream struct {
	stops   []string
	pending []byte
}

func newStream(stops []string) *stream {
	s := &stream{}
	for _, st := range stops {
		if st != "" {
			s.stops = append(s.stops, st)
		}
	}
	return s
}

// push adds one token's bytes and returns the text that can be released now. stopped reports
// that a stop string was found: the returned text is everything before it and the rest is
// dropped.
func (s *stream) push(b []byte) (text string, stopped bool) {
	s.pending = append(s.pending, b...)
	if i := s.firstStop(); i >= 0 {
		text = string(s.pending[:i])
		s.pending = s.pending[:0]
		return text, true
	}
	n := min(utf8Complete(s.pending), len(s.pending)-s.stopPrefixLen())
	text = string(s.pending[:n])
	s.pending = append(s.pending[:0], s.pending[n:]...)
	return text, false
}

// flush releases whatever is held back.
func (s *stream) flush() string {
	t := string(s.pending)
	s.pending = s.pending[:0]
	return t
}

// firstStop returns the byte offset of the earliest stop string in pending, or -1.
func (s *stream) firstStop() int {
	best := -1
	for _, st := range s.stops {
		if i := strings.Index(string(s.pending), st); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// stopPrefixLen is the length of the longest tail of pending that is a proper prefix of a stop
// string.
func (s *stream) stopPrefixLen() int {
	longest := 0
	for _, st := range s.stops {
		for n := min(len(st)-1, len(s.pending)); n > longest; n-- {
			if string(s.pending[len(s.pending)-n:]) == st[:n] {
				longest = n
				break
			}
		}
	}
	return longest
}

// utf8Complete returns the length of b without a trailing incomplete UTF-8 sequence. Invalid
// bytes are not held (they will never complete).
func utf8Complete(b []byte) int {
	// look back at most 3 bytes for the start of a multi-byte sequence
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		c := b[i]
		if c < 0x80 {
			return len(b) // ASCII: everything before is complete or invalid
		}
		if c >= 0xC0 { // a leading byte
			need := 2
			if c >= 0xF0 {
				need = 4
			} else if c >= 0xE0 {
				need = 3
			}
			if len(b)-i < need && utf8.FullRune(b[i:]) == false {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}
