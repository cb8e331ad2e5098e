package app

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestReplyErrorIsOneSentenceWithoutTheWrappingLayers(t *testing.T) {
	base := errors.New("the prompt has 2074 tokens but the context holds 2048; shorten the conversation or load the model with a larger context")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"the issue's chain", fmt.Errorf("generate reply: %w", fmt.Errorf("engine chat: generate: generate: %w", base)),
			"The prompt has 2074 tokens but the context holds 2048; shorten the conversation or load the model with a larger context."},
		{"a sentence already ended", errors.New("engine chat: The model file is gone (it was moved)"), "The model file is gone (it was moved)"},
		{"a timeout", fmt.Errorf("engine chat: %w", context.DeadlineExceeded),
			"The engine did not answer in time. Send the message again; if it keeps happening, try a smaller model or a shorter conversation."},
		{"a dead engine's socket", errors.New(`engine chat: Post "http://127.0.0.1:4321/v1/chat/completions": dial tcp 127.0.0.1:4321: connect: connection refused`),
			"The engine is not running right now (it is being restarted). Send the message again in a moment."},
		{"nothing left after the layers", errors.New("engine chat: "), "The engine failed without saying why; send the message again."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := newReplyError(tc.err)
			if got.Error() != tc.want {
				t.Fatalf("got %q, want %q", got.Error(), tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Fatal("the sentence no longer wraps the error")
			}
		})
	}
}
