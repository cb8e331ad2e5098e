package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vkllm/vkllm/engine/tokenizer"
)

// ErrPromptTooLong is matched by a *PromptTooLongError.
var ErrPromptTooLong = errors.New("the prompt does not fit the context")

// PromptTooLongError is a prompt that cannot fit the loaded model's context, with the numbers.
type PromptTooLongError struct {
	Bytes   int  // bytes of prompt text (for a chat, of the messages or of the rendered chat)
	Tokens  int  // the prompt's tokens; a lower bound when AtLeast
	AtLeast bool // refused from its size before it was tokenized in full
	Context int  // positions the context holds
}

func (e *PromptTooLongError) Error() string {
	const remedy = "shorten it or load the model with a larger context (--ctx)"
	if e.AtLeast {
		return fmt.Sprintf("the prompt of %d bytes has at least %d tokens but the context holds %d; %s", e.Bytes, e.Tokens, e.Context, remedy)
	}
	return fmt.Sprintf("the prompt has %d tokens but the context holds %d; %s", e.Tokens, e.Context, remedy)
}

func (e *PromptTooLongError) Is(target error) bool { return target == ErrPromptTooLong }

// MaxPromptBytes is the most bytes of text a prompt that fits the context can have (no token
// covers more bytes than the vocabulary's longest), or -1 when the vocabulary gives no bound.
func (e *Engine) MaxPromptBytes() int64 {
	return e.tok.MaxTextBytes(e.info.Context)
}

// PromptTokens renders and tokenizes a request as Generate does, for a caller that wants to do
// it before its turn: it does not wait for a generation in progress. A prompt whose size alone
// shows it cannot fit the context is refused before it is rendered or tokenized, and
// tokenizing stops as soon as the tokens pass the context; both give a *PromptTooLongError.
// Cancelling ctx stops the render and the tokenizing.
func (e *Engine) PromptTokens(ctx context.Context, req GenerateRequest) ([]int, error) {
	if e.tok == nil {
		return nil, errors.New("tokenize: the engine is closed")
	}
	return e.promptTokens(ctx, req)
}

// promptTokens tokenizes the request: the raw prompt with BOS as the model says, or the
// messages rendered with the chat template.
func (e *Engine) promptTokens(ctx context.Context, req GenerateRequest) ([]int, error) {
	if req.Prompt != "" || len(req.Messages) == 0 {
		if req.Prompt == "" {
			return nil, errors.New("empty request: give a prompt or messages")
		}
		if err := e.checkSize(req.Prompt); err != nil {
			return nil, err
		}
		return e.encode(ctx, req.Prompt)
	}
	// The messages' contents are bounded before rendering: nearly every template keeps them all.
	bytes, least := 0, 0
	for _, m := range req.Messages {
		bytes += len(m.Content)
		least += e.tok.MinTokens(m.Content)
	}
	if least >= e.info.Context {
		return nil, &PromptTooLongError{Bytes: bytes, Tokens: least, AtLeast: true, Context: e.info.Context}
	}
	text, err := e.RenderChat(ctx, req.Messages)
	if err != nil {
		return nil, err
	}
	if err := e.checkSize(text); err != nil {
		return nil, err
	}
	ids, err := e.encode(ctx, text)
	if err != nil {
		return nil, err
	}
	// Templates usually write the BOS token themselves: do not start with two of them.
	if bos := e.tok.BOS(); len(ids) >= 2 && bos >= 0 && ids[0] == bos && ids[1] == bos {
		ids = ids[1:]
	}
	// An add_eos_token model would close the prompt; the assistant's turn must stay open.
	if eos := e.tok.EOS(); len(ids) >= 2 && eos >= 0 && ids[len(ids)-1] == eos && !strings.HasSuffix(text, e.tok.Token(eos)) {
		ids = ids[:len(ids)-1]
	}
	return ids, nil
}

// checkSize refuses a text whose bytes alone need more tokens than the context holds.
func (e *Engine) checkSize(text string) error {
	if n := e.tok.MinTokens(text); n >= e.info.Context {
		return &PromptTooLongError{Bytes: len(text), Tokens: n, AtLeast: true, Context: e.info.Context}
	}
	return nil
}

// encode tokenizes text with BOS as the model says, stopping once the tokens pass the context
// (one more is allowed: a doubled BOS is dropped afterwards).
func (e *Engine) encode(ctx context.Context, text string) ([]int, error) {
	limit := e.info.Context
	ids, err := e.tok.EncodeContext(ctx, text, true, true, limit)
	if errors.Is(err, tokenizer.ErrTooManyTokens) {
		return nil, &PromptTooLongError{Bytes: len(text), Tokens: limit + 1, AtLeast: true, Context: e.info.Context}
	}
	return ids, err
}
