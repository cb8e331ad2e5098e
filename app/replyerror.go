package app

import (
	"context"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// replyError is a failed generation as the user reads it: one sentence with the cause and, where
// there is one, the remedy, instead of the chain of wrapping layers ("generate reply: engine
// chat: generate: …"). It still wraps the error for errors.Is and the logs.
type replyError struct {
	msg string
	err error
}

func (e *replyError) Error() string { return e.msg }
func (e *replyError) Unwrap() error { return e.err }

// internalPrefixes are the wrapping layers a generation error passes through on its way from the
// engine to the app; none of them means anything to the user.
var internalPrefixes = []string{"generate reply: ", "engine chat: ", "generate: ", "engine: ", "chat: ", "sidecar: "}

// newReplyError says err in one sentence.
func newReplyError(err error) *replyError {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &replyError{"The engine did not answer in time. Send the message again; if it keeps happening, try a smaller model or a shorter conversation.", err}
	case isConnectionRefused(err):
		return &replyError{"The engine is not running right now (it is being restarted). Send the message again in a moment.", err}
	}
	msg := err.Error()
	for trimmed := true; trimmed; {
		trimmed = false
		for _, p := range internalPrefixes {
			if rest, ok := strings.CutPrefix(msg, p); ok {
				msg, trimmed = rest, true
			}
		}
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = "the engine failed without saying why; send the message again"
	}
	r, n := utf8.DecodeRuneInString(msg)
	msg = string(unicode.ToUpper(r)) + msg[n:]
	if !strings.HasSuffix(msg, ".") && !strings.HasSuffix(msg, "?") && !strings.HasSuffix(msg, "!") && !strings.HasSuffix(msg, ")") {
		msg += "."
	}
	return &replyError{msg, err}
}

func isConnectionRefused(err error) bool {
	return strings.Contains(err.Error(), "connection refused")
}
