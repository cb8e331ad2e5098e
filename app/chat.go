package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/sample"
)

// saveInterval is how often the text of a streaming reply is written to the store, so a reply cut
// off by the app itself dying keeps what it had (the next start marks it interrupted).
const saveInterval = time.Second

// deltaInterval is how long streamed text is gathered before one chat:delta event carries it: a
// token per event would flood the UI's event loop at hundreds of tokens per second.
const deltaInterval = 30 * time.Millisecond

// ChatEvent is the payload of chat:event: a generation started (with the saved user message and
// the assistant message being streamed) or finished (with the final assistant message).
type ChatEvent struct {
	Kind           string        `json:"kind"` // "started" | "finished"
	ConversationID int64         `json:"conversationId"`
	Conversation   *Conversation `json:"conversation,omitempty"`
	User           *Message      `json:"user,omitempty"`
	Assistant      Message       `json:"assistant"`
	Context        *ContextUse   `json:"context,omitempty"` // finished: the context the reply took
	AtMs           int64         `json:"atMs"`
}

// ChatDelta is the payload of chat:delta: text appended to a streaming assistant message.
type ChatDelta struct {
	Kind           string `json:"kind"` // "delta"
	ConversationID int64  `json:"conversationId"`
	MessageID      int64  `json:"messageId"`
	Text           string `json:"text"`
	AtMs           int64  `json:"atMs"`
}

// ChatSettings are the generation settings of a reply; they are saved with it as JSON.
type ChatSettings struct {
	MaxTokens int           `json:"maxTokens"`
	Sampling  sample.Params `json:"sampling"`
}

// DefaultChatSettings suit a small story model: mild temperature, nucleus sampling, a bounded reply.
func DefaultChatSettings() ChatSettings {
	return ChatSettings{MaxTokens: 256, Sampling: sample.Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05}}
}

// ChatService lists, creates and deletes conversations and streams replies into them.
type ChatService struct {
	ctx      context.Context
	engine   Engine
	store    ChatStore
	emit     Emitter
	settings ChatSettings

	mu       sync.Mutex
	inFlight map[int64]context.CancelFunc // conversation id -> cancel of its generation
	windows  map[int64]int64              // conversation id -> first message id its window keeps (fitContext)
}

// NewChatService returns the chat service; ctx bounds every call (the app's lifetime).
func NewChatService(ctx context.Context, eng Engine, st ChatStore, em Emitter) *ChatService {
	return &ChatService{ctx: ctx, engine: eng, store: st, emit: em, settings: DefaultChatSettings(), inFlight: map[int64]context.CancelFunc{}, windows: map[int64]int64{}}
}

// SetSettings replaces the generation settings used by later replies.
func (s *ChatService) SetSettings(cs ChatSettings) { s.mu.Lock(); s.settings = cs; s.mu.Unlock() }

// ListConversations returns every conversation, most recently updated first.
func (s *ChatService) ListConversations() ([]Conversation, error) {
	convs, err := s.store.ListConversations(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	if convs == nil {
		convs = []Conversation{}
	}
	return convs, nil
}

// CreateConversation starts an empty conversation with the given title ("" = "New chat").
func (s *ChatService) CreateConversation(title string) (Conversation, error) {
	title = strings.TrimSpace(title)
	if title == "" {
		title = "New chat"
	}
	c, err := s.store.CreateConversation(s.ctx, title, s.modelName())
	if err != nil {
		return Conversation{}, fmt.Errorf("create conversation %q: %w", title, err)
	}
	return c, nil
}

// SetContextPolicy sets what a conversation does once its history outgrows the context:
// "rolling" (drop the oldest turns after the system prompt; the default), "truncate-middle"
// (keep the first turn and the latest ones) or "stop" (refuse with the numbers). It applies from
// the next message on.
func (s *ChatService) SetContextPolicy(conversationID int64, policy string) (Conversation, error) {
	p, err := ParseContextPolicy(policy)
	if err != nil {
		return Conversation{}, err
	}
	if err := s.store.SetContextPolicy(s.ctx, conversationID, string(p)); err != nil {
		return Conversation{}, fmt.Errorf("set the context policy of conversation %d: %w", conversationID, err)
	}
	c, err := s.store.Conversation(s.ctx, conversationID)
	if err != nil {
		return Conversation{}, fmt.Errorf("read conversation %d: %w", conversationID, err)
	}
	return c, nil
}

// DeleteConversation removes a conversation and its messages, stopping its generation if one runs.
func (s *ChatService) DeleteConversation(id int64) error {
	s.Stop(id)
	if err := s.store.DeleteConversation(s.ctx, id); err != nil {
		return fmt.Errorf("delete conversation %d: %w", id, err)
	}
	s.mu.Lock()
	delete(s.windows, id)
	s.mu.Unlock()
	return nil
}

// Messages returns a conversation's messages in order.
func (s *ChatService) Messages(conversationID int64) ([]Message, error) {
	msgs, err := s.store.Messages(s.ctx, conversationID)
	if err != nil {
		return nil, fmt.Errorf("messages of conversation %d: %w", conversationID, err)
	}
	if msgs == nil {
		msgs = []Message{}
	}
	return msgs, nil
}

// Stop cancels the generation running in a conversation; its reply is saved as interrupted with
// the text it had. It reports whether a generation was running.
func (s *ChatService) Stop(conversationID int64) bool {
	s.mu.Lock()
	cancel, ok := s.inFlight[conversationID]
	s.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// Send saves the user's message, streams the reply as chat:delta events and saves it with its
// speed and time to first token. conversationID 0 starts a new conversation titled after the
// text. It returns the saved assistant message once the generation ends; a reply cut off by Stop
// or by the engine dying is saved as "interrupted" with its partial text and returned without an
// error, so the UI shows what there is.
func (s *ChatService) Send(conversationID int64, text string) (Message, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return Message{}, errors.New("send message: the message is empty; type something first")
	}
	ctx := s.ctx
	var created *Conversation
	if conversationID == 0 {
		c, err := s.CreateConversation(titleFrom(text))
		if err != nil {
			return Message{}, err
		}
		conversationID, created = c.ID, &c
	}

	genCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if _, busy := s.inFlight[conversationID]; busy {
		s.mu.Unlock()
		return Message{}, fmt.Errorf("send message: conversation %d is still generating; stop it or wait for the reply", conversationID)
	}
	s.inFlight[conversationID] = cancel
	settings := s.settings
	s.mu.Unlock()
	defer func() { s.mu.Lock(); delete(s.inFlight, conversationID); s.mu.Unlock() }()

	history, err := s.store.Messages(ctx, conversationID)
	if err != nil {
		return Message{}, fmt.Errorf("load conversation %d: %w", conversationID, err)
	}
	model := s.modelName()
	settingsJSON, _ := json.Marshal(settings)
	user, err := s.store.AddMessage(ctx, Message{ConversationID: conversationID, Role: "user", Content: text, State: StateComplete, CreatedAtMs: nowMs()})
	if err != nil {
		return Message{}, fmt.Errorf("save user message in conversation %d: %w", conversationID, err)
	}
	asst, err := s.store.AddMessage(ctx, Message{ConversationID: conversationID, Role: "assistant", State: StateStreaming, Model: model, Settings: string(settingsJSON), CreatedAtMs: nowMs()})
	if err != nil {
		return Message{}, fmt.Errorf("save assistant message in conversation %d: %w", conversationID, err)
	}
	s.emit.Emit(EventChat, ChatEvent{Kind: "started", ConversationID: conversationID, Conversation: created, User: &user, Assistant: asst, AtMs: nowMs()})

	// The policy fits the history into the context before the engine sees it, so a long
	// conversation never reaches the engine's own refusal and keeps working on later messages.
	fit, fitErr := s.fitPrompt(ctx, conversationID, promptHistory(history, user), settings.MaxTokens)
	if fitErr != nil {
		return s.finish(ctx, conversationID, asst, fitErr, false, nil)
	}
	req := ChatRequest{Messages: fit.msgs, MaxTokens: settings.MaxTokens, Sampling: settings.Sampling}
	batch := newDeltaBatcher(s.emit, conversationID, asst.ID, deltaInterval)
	start := time.Now()
	var firstAt time.Duration
	var pieces int
	lastSave := start
	res, genErr := s.engine.ChatStream(genCtx, req, func(delta string) error {
		if pieces == 0 {
			firstAt = time.Since(start)
		}
		pieces++
		batch.add(delta)
		if time.Since(lastSave) >= saveInterval {
			lastSave = time.Now()
			partial := asst
			partial.Content = batch.text()
			if err := s.store.UpdateMessage(ctx, partial); err != nil {
				slog.Warn("save streaming reply", "conversation", conversationID, "message", asst.ID, "err", err)
			}
		}
		return nil
	})
	batch.close()
	elapsed := time.Since(start)

	asst.Content = res.Text
	if asst.Content == "" {
		asst.Content = batch.text()
	}
	asst.TTFTMs, asst.TokensPerSec = speed(res.Timings, firstAt, elapsed, pieces)
	use := &ContextUse{Used: fit.count.Tokens + res.Timings.GeneratedTokens, Context: fit.count.Context, PromptTokens: fit.count.Tokens, Dropped: fit.dropped, Policy: string(fit.policy)}
	if res.Timings.GeneratedTokens == 0 && pieces > 0 {
		use.Used += pieces // an engine without timings: a piece is about a token
	}
	return s.finish(ctx, conversationID, asst, genErr, genCtx.Err() != nil, use)
}

// finish saves the reply's final state and announces it. A generation that failed saves the
// error's sentence as the reply's text and returns the error; one cut off by Stop or by the
// engine dying is interrupted and returns none.
func (s *ChatService) finish(ctx context.Context, conversationID int64, asst Message, genErr error, stopped bool, use *ContextUse) (Message, error) {
	var fitErr *contextError
	switch {
	case genErr == nil:
		asst.State = StateComplete
	case errors.As(genErr, &fitErr):
		asst.State, asst.Content = StateError, fitErr.Error()
	case errors.Is(genErr, ErrEngineDied) || stopped:
		asst.State = StateInterrupted
		slog.Warn("reply interrupted", "conversation", conversationID, "message", asst.ID, "chars", len(asst.Content), "err", genErr)
	default:
		asst.State = StateError
		if asst.Content == "" {
			asst.Content = genErr.Error()
		}
	}
	// The reply is saved even when the app is shutting down: use a context that outlives ctx.
	saveCtx, saveCancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer saveCancel()
	if err := s.store.UpdateMessage(saveCtx, asst); err != nil {
		return asst, fmt.Errorf("save reply in conversation %d: %w", conversationID, err)
	}
	s.emit.Emit(EventChat, ChatEvent{Kind: "finished", ConversationID: conversationID, Assistant: asst, Context: use, AtMs: nowMs()})
	if fitErr != nil {
		return asst, fitErr
	}
	if asst.State == StateError {
		return asst, fmt.Errorf("generate reply: %w", genErr)
	}
	return asst, nil
}

func (s *ChatService) modelName() string {
	info, err := s.engine.Model(s.ctx)
	if err != nil {
		return ""
	}
	return info.Name
}

// promptHistory is the history the engine may see: finished turns with text, then the new
// message.
func promptHistory(history []Message, user Message) []Message {
	out := make([]Message, 0, len(history)+1)
	for _, m := range history {
		if m.Content == "" || m.State == StateError || m.State == StateStreaming {
			continue
		}
		out = append(out, m)
	}
	return append(out, user)
}

// contextError is a message the conversation's context policy refused (the stop policy, or a
// message too long for what is always kept); its text is the one sentence the user sees.
type contextError struct{ msg string }

func (e *contextError) Error() string { return e.msg }

// fitPrompt applies the conversation's context policy to its history and remembers where the
// window starts for the next message.
func (s *ChatService) fitPrompt(ctx context.Context, conversationID int64, history []Message, maxTokens int) (fittedPolicy, error) {
	policy := PolicyRolling
	if c, err := s.store.Conversation(ctx, conversationID); err != nil {
		slog.Warn("read the conversation's context policy; using the rolling window", "conversation", conversationID, "err", err)
	} else if p, err := ParseContextPolicy(c.ContextPolicy); err != nil {
		slog.Warn("unknown context policy; using the rolling window", "conversation", conversationID, "err", err)
	} else {
		policy = p
	}
	s.mu.Lock()
	windowAt := s.windows[conversationID]
	s.mu.Unlock()
	f, err := fitContext(ctx, s.engine.PromptTokens, policy, history, maxTokens, windowAt)
	if err != nil {
		var ce *contextError
		if errors.As(err, &ce) {
			return fittedPolicy{fitted: f, policy: policy}, ce
		}
		return fittedPolicy{fitted: f, policy: policy}, fmt.Errorf("fit conversation %d into the context: %w", conversationID, err)
	}
	s.mu.Lock()
	s.windows[conversationID] = f.windowAt
	s.mu.Unlock()
	return fittedPolicy{fitted: f, policy: policy}, nil
}

type fittedPolicy struct {
	fitted
	policy ContextPolicy
}

// speed takes the engine's own timings when it reports them, else what the app measured.
func speed(t engine.Timings, firstAt, elapsed time.Duration, pieces int) (ttftMs int64, tokPerSec float64) {
	if t.TimeToFirst > 0 {
		ttftMs = t.TimeToFirst.Milliseconds()
	} else {
		ttftMs = firstAt.Milliseconds()
	}
	switch {
	case t.GenPerSec > 0:
		tokPerSec = t.GenPerSec
	case t.GeneratedTokens > 1 && t.Generation > 0:
		tokPerSec = float64(t.GeneratedTokens) / t.Generation.Seconds()
	case pieces > 1 && elapsed > firstAt:
		tokPerSec = float64(pieces-1) / (elapsed - firstAt).Seconds()
	}
	return ttftMs, tokPerSec
}

// titleFrom makes a conversation title of the first words of its first message.
func titleFrom(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	const max = 48
	if utf8.RuneCountInString(text) <= max {
		return text
	}
	r := []rune(text)[:max]
	if i := strings.LastIndexByte(string(r), ' '); i > max/2 {
		return string(r)[:i] + "…"
	}
	return string(r) + "…"
}

// deltaBatcher gathers streamed text and emits it as one chat:delta per interval.
type deltaBatcher struct {
	emit        Emitter
	conv, msgID int64

	mu      sync.Mutex
	pending strings.Builder
	all     strings.Builder
	stop    chan struct{}
	done    chan struct{}
}

func newDeltaBatcher(em Emitter, conv, msgID int64, every time.Duration) *deltaBatcher {
	b := &deltaBatcher{emit: em, conv: conv, msgID: msgID, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				b.flush()
			case <-b.stop:
				b.flush()
				return
			}
		}
	}()
	return b
}

func (b *deltaBatcher) add(s string) {
	b.mu.Lock()
	b.pending.WriteString(s)
	b.all.WriteString(s)
	b.mu.Unlock()
}

func (b *deltaBatcher) flush() {
	b.mu.Lock()
	s := b.pending.String()
	b.pending.Reset()
	b.mu.Unlock()
	if s != "" {
		b.emit.Emit(EventDelta, ChatDelta{Kind: "delta", ConversationID: b.conv, MessageID: b.msgID, Text: s, AtMs: nowMs()})
	}
}

// close emits what is left and stops the ticker; no delta is emitted after it returns.
func (b *deltaBatcher) close() {
	close(b.stop)
	<-b.done
}

func (b *deltaBatcher) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.all.String()
}
