package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/vkllm/vkllm/engine"
)

// ContextPolicy says what a conversation does once its history outgrows the model's context
// (LM Studio's three choices).
type ContextPolicy string

const (
	// PolicyRolling drops the oldest whole turns after the system prompt (the default).
	PolicyRolling ContextPolicy = "rolling"
	// PolicyTruncateMiddle keeps the system prompt and the first turn and drops the turns after it.
	PolicyTruncateMiddle ContextPolicy = "truncate-middle"
	// PolicyStop refuses the message with the numbers and the remedy.
	PolicyStop ContextPolicy = "stop"
)

// ContextPolicies lists the policies in the order the UI offers them.
var ContextPolicies = []ContextPolicy{PolicyRolling, PolicyTruncateMiddle, PolicyStop}

// ParseContextPolicy reads a stored or requested policy; "" is the default.
func ParseContextPolicy(s string) (ContextPolicy, error) {
	switch p := ContextPolicy(strings.TrimSpace(s)); p {
	case "":
		return PolicyRolling, nil
	case PolicyRolling, PolicyTruncateMiddle, PolicyStop:
		return p, nil
	}
	return "", fmt.Errorf("context policy %q is not rolling, truncate-middle or stop; pick one of those", s)
}

// PromptCount is how many tokens a chat renders to with the loaded model, and the context it has
// to fit. TooLong says it passed the context before it was counted in full (Tokens is then a
// lower bound).
type PromptCount struct {
	Tokens  int
	Context int
	TooLong bool
}

// ContextUse is how much of the context one reply took, for the line under the composer.
type ContextUse struct {
	Used         int    `json:"used"`         // prompt tokens plus the reply's tokens
	Context      int    `json:"context"`      // positions the loaded model's context holds
	PromptTokens int    `json:"promptTokens"` // the prompt as sent, after the policy
	Dropped      int    `json:"dropped"`      // earlier messages the policy left out of the prompt
	Policy       string `json:"policy"`
	// Evaluated is how many of the prompt's tokens the engine evaluated; the rest came from its
	// prefix cache (the conversation so far). 0 = the engine did not say.
	Evaluated int `json:"evaluated"`
}

// lowWaterDiv sets how far a rolling window falls back when it rolls: to half the context. A
// window that dropped only what the new turn needed would roll on every later turn, and every
// roll changes the prompt at its front, so the engine's prefix cache would miss each time. Rolling
// further keeps the front fixed for the next several turns.
const lowWaterDiv = 2

// turn is one user message with the replies after it; leading system messages are no turn.
type turn struct {
	firstID int64 // the id of the turn's first message
	msgs    []engine.Message
}

// splitTurns parts the prompt's messages into the leading system messages and the turns.
func splitTurns(history []Message) (system []engine.Message, turns []turn) {
	for _, m := range history {
		em := engine.Message{Role: m.Role, Content: m.Content}
		switch {
		case len(turns) == 0 && m.Role == "system":
			system = append(system, em)
		case m.Role == "user" || len(turns) == 0:
			turns = append(turns, turn{firstID: m.ID, msgs: []engine.Message{em}})
		default:
			turns[len(turns)-1].msgs = append(turns[len(turns)-1].msgs, em)
		}
	}
	return system, turns
}

// fitted is the prompt a policy chose.
type fitted struct {
	msgs     []engine.Message
	count    PromptCount
	dropped  int   // messages left out
	windowAt int64 // first id of the first turn after the kept head; 0 when nothing was dropped
}

// fitContext applies a policy to the prompt's messages (history then the new user message, each
// with its id). The room kept for the reply follows from maxTokens (replyReserve). windowAt is where the conversation's
// window started last time (0: nowhere yet): the window does not move back, and it moves only
// when the prompt no longer fits, so turns that do not roll keep the prompt's front and the
// engine's prefix cache reuses the whole history (time to first token grows with the new text).
// A roll changes the front, and the engine evaluates the whole prompt again once.
func fitContext(ctx context.Context, count func(context.Context, []engine.Message) (PromptCount, error), policy ContextPolicy, history []Message, maxTokens int, windowAt int64) (fitted, error) {
	system, turns := splitTurns(history)
	head := 0 // leading turns always kept
	if policy == PolicyTruncateMiddle && len(turns) > 1 {
		head = 1
	}
	build := func(skip int) ([]engine.Message, int) {
		out := append([]engine.Message(nil), system...)
		dropped := 0
		for i, t := range turns {
			if i >= head && i < head+skip {
				dropped += len(t.msgs)
				continue
			}
			out = append(out, t.msgs...)
		}
		return out, dropped
	}
	reserve := 0
	fits := func(c PromptCount, limit int) bool { return !c.TooLong && c.Tokens+reserve <= limit }

	// the turns the window already left out stay out
	start := 0
	if policy != PolicyStop && windowAt > 0 {
		for start < len(turns)-1-head && turns[head+start].firstID < windowAt {
			start++
		}
	}
	msgs, dropped := build(start)
	c, err := count(ctx, msgs)
	if err != nil {
		return fitted{}, fmt.Errorf("count the prompt's tokens: %w", err)
	}
	reserve = replyReserve(maxTokens, c.Context)
	if fits(c, c.Context) {
		return fitted{msgs: msgs, count: c, dropped: dropped, windowAt: windowAtOf(turns, head, start)}, nil
	}
	if policy == PolicyStop {
		return fitted{count: c}, &contextError{msg: fmt.Sprintf("This conversation needs %s tokens plus %d for the reply but the context holds %d, so it stops here; start a new chat or switch its context policy to rolling window or truncate middle.", atLeast(c), reserve, c.Context)}
	}
	// Roll: drop more turns until the prompt fits under the low water mark, or at least fits.
	var best *fitted
	low := c.Context / lowWaterDiv
	for skip := start + 1; skip <= len(turns)-1-head; skip++ {
		msgs, dropped := build(skip)
		c, err := count(ctx, msgs)
		if err != nil {
			return fitted{}, fmt.Errorf("count the prompt's tokens: %w", err)
		}
		if !fits(c, c.Context) {
			continue
		}
		f := fitted{msgs: msgs, count: c, dropped: dropped, windowAt: windowAtOf(turns, head, skip)}
		if best == nil {
			best = &f
		}
		if fits(c, low) {
			best = &f
			break
		}
	}
	if best == nil {
		return fitted{count: c}, &contextError{msg: fmt.Sprintf("The new message needs %s tokens with what is always kept plus %d for the reply but the context holds %d; shorten the message or load the model with a larger context.", atLeast(c), reserve, c.Context)}
	}
	slog.Info("context window rolled", "policy", policy, "dropped_messages", best.dropped, "prompt_tokens", best.count.Tokens, "context", best.count.Context, "reserve", reserve)
	return *best, nil
}

func windowAtOf(turns []turn, head, skip int) int64 {
	if skip == 0 || head+skip >= len(turns) {
		return 0
	}
	return turns[head+skip].firstID
}

func atLeast(c PromptCount) string {
	if c.TooLong {
		return fmt.Sprintf("at least %d", c.Tokens)
	}
	return fmt.Sprint(c.Tokens)
}

// replyReserve is the room a prompt leaves for the reply: the reply's token limit, at most half
// the context; a quarter of it when replies are unbounded.
func replyReserve(maxTokens, context int) int {
	if maxTokens <= 0 {
		return context / 4
	}
	return min(maxTokens, context/2)
}
