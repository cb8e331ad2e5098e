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

	"github.com/vkllm/vkllm/engine"
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

// CreateConversation starts an empty conversation titled with the first few words of title
// ("" = "New chat"), numbered " (2)", " (3)", … when another conversation has that title.
func (s *ChatService) CreateConversation(title string) (Conversation, error) {
	title = titleFrom(title)
	if title == "" {
		title = "New chat"
	}
	listed, err := s.store.ListConversations(s.ctx)
	if err != nil {
		return Conversation{}, fmt.Errorf("create conversation %q: %w", title, err)
	}
	title = distinctTitle(title, listed)
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
// speed, time to first token and stop reason. conversationID 0 starts a new conversation titled
// after the text. It returns the saved assistant message once the generation ends; a reply cut
// off by Stop or by the engine dying is saved as "interrupted" with its partial text and returned
// without an error, so the UI shows what there is.
func (s *ChatService) Send(conversationID int64, text string) (Message, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return Message{}, errors.New("send message: the message is empty; type something first")
	}
	var created *Conversation
	if conversationID == 0 {
		c, err := s.CreateConversation(text)
		if err != nil {
			return Message{}, err
		}
		conversationID, created = c.ID, &c
	}
	return s.turn(conversationID, func(ctx context.Context, history []Message) (turnPlan, error) {
		user, err := s.store.AddMessage(ctx, Message{ConversationID: conversationID, Role: "user", Content: text, State: StateComplete, CreatedAtMs: nowMs()})
		if err != nil {
			return turnPlan{}, fmt.Errorf("save user message in conversation %d: %w", conversationID, err)
		}
		return turnPlan{created: created, user: &user, history: append(history, user)}, nil
	})
}

// Regenerate answers the messages before a reply again, keeping the reply's earlier versions as
// its alternatives (SelectAlternative flips between them): the new version streams into the same
// message, and the messages after it are removed, since they answered the old one.
func (s *ChatService) Regenerate(conversationID, messageID int64) (Message, error) {
	return s.turn(conversationID, func(ctx context.Context, history []Message) (turnPlan, error) {
		i, err := findMessage(history, conversationID, messageID, "assistant", "regenerate")
		if err != nil {
			return turnPlan{}, err
		}
		if i+1 < len(history) {
			if err := s.deleteFrom(ctx, conversationID, history[i+1].ID, true); err != nil {
				return turnPlan{}, err
			}
		}
		alt, err := s.store.NewAlternative(ctx, messageID)
		if err != nil {
			return turnPlan{}, fmt.Errorf("regenerate message %d of conversation %d: %w", messageID, conversationID, err)
		}
		return turnPlan{history: history[:i], regenerated: &alt}, nil
	})
}

// SelectAlternative shows version index (0-based) of a regenerated reply; that version is the one
// later turns see. It returns the message holding it.
func (s *ChatService) SelectAlternative(conversationID, messageID int64, index int) (Message, error) {
	s.mu.Lock()
	_, busy := s.inFlight[conversationID]
	s.mu.Unlock()
	if busy {
		return Message{}, fmt.Errorf("show another version of message %d: conversation %d is still generating; stop it or wait for the reply", messageID, conversationID)
	}
	history, err := s.store.Messages(s.ctx, conversationID)
	if err != nil {
		return Message{}, fmt.Errorf("load conversation %d: %w", conversationID, err)
	}
	if _, err := findMessage(history, conversationID, messageID, "assistant", "switch versions of"); err != nil {
		return Message{}, err
	}
	m, err := s.store.SelectAlternative(s.ctx, messageID, index)
	if err != nil {
		return Message{}, fmt.Errorf("show version %d of message %d: %w", index+1, messageID, err)
	}
	return m, nil
}

// Edit replaces one of the user's messages with text and answers it anew: the message and every
// message after it are removed, the edited one is saved in its place and the model replies.
func (s *ChatService) Edit(conversationID, messageID int64, text string) (Message, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return Message{}, errors.New("edit message: the new text is empty; type something, or delete the message instead")
	}
	return s.turn(conversationID, func(ctx context.Context, history []Message) (turnPlan, error) {
		i, err := findMessage(history, conversationID, messageID, "user", "edit")
		if err != nil {
			return turnPlan{}, err
		}
		if err := s.deleteFrom(ctx, conversationID, messageID, true); err != nil {
			return turnPlan{}, err
		}
		user, err := s.store.AddMessage(ctx, Message{ConversationID: conversationID, Role: "user", Content: text, State: StateComplete, CreatedAtMs: nowMs()})
		if err != nil {
			return turnPlan{}, fmt.Errorf("save the edited message in conversation %d: %w", conversationID, err)
		}
		return turnPlan{user: &user, history: append(history[:i:i], user)}, nil
	})
}

// Continue lets the model go on with the conversation's last reply (one cut off by max tokens or
// by Stop): the new text is appended to it, and it is saved with the new stop reason.
func (s *ChatService) Continue(conversationID, messageID int64) (Message, error) {
	return s.turn(conversationID, func(_ context.Context, history []Message) (turnPlan, error) {
		i, err := findMessage(history, conversationID, messageID, "assistant", "continue")
		if err != nil {
			return turnPlan{}, err
		}
		if i != len(history)-1 {
			return turnPlan{}, fmt.Errorf("continue message %d: only the conversation's last reply can be continued; regenerate this one instead", messageID)
		}
		if history[i].Content == "" {
			return turnPlan{}, fmt.Errorf("continue message %d: the reply has no text to go on from; regenerate it instead", messageID)
		}
		return turnPlan{history: history, continued: &history[i]}, nil
	})
}

// DeleteMessage removes one message from a conversation (the turns around it stay).
func (s *ChatService) DeleteMessage(conversationID, messageID int64) error {
	s.mu.Lock()
	_, busy := s.inFlight[conversationID]
	s.mu.Unlock()
	if busy {
		return fmt.Errorf("delete message %d: conversation %d is still generating; stop it or wait for the reply", messageID, conversationID)
	}
	return s.deleteFrom(s.ctx, conversationID, messageID, false)
}

// deleteFrom removes a message (and with andLater every one after it) and forgets where the
// conversation's rolling window started, since the ids it kept may be gone.
func (s *ChatService) deleteFrom(ctx context.Context, conversationID, messageID int64, andLater bool) error {
	if _, err := s.store.DeleteMessages(ctx, conversationID, messageID, andLater); err != nil {
		return fmt.Errorf("delete message %d of conversation %d: %w", messageID, conversationID, err)
	}
	s.mu.Lock()
	delete(s.windows, conversationID)
	s.mu.Unlock()
	return nil
}

// findMessage is the index of message id in history, checking it has the role an action needs.
func findMessage(history []Message, conversationID, id int64, role, action string) (int, error) {
	for i, m := range history {
		if m.ID != id {
			continue
		}
		if m.Role != role {
			return 0, fmt.Errorf("%s message %d: it is a %s message; only a %s message can be %s", action, id, m.Role, role, pastTense(action))
		}
		return i, nil
	}
	return 0, fmt.Errorf("%s message %d: conversation %d has no such message (it may have been deleted); reload the conversation", action, id, conversationID)
}

func pastTense(action string) string {
	switch action {
	case "edit":
		return "edited"
	case "continue":
		return "continued"
	case "switch versions of":
		return "switched between versions"
	}
	return action + "d"
}

// turnPlan is what one reply starts from: the history up to it (the new user message included),
// and either a new assistant message or the reply being continued.
type turnPlan struct {
	created   *Conversation // a conversation Send made for this message
	user      *Message      // the user message this turn saved, if any
	history   []Message     // the stored messages the reply answers, in order
	continued *Message      // the reply being continued (the last of history), or nil
	// regenerated is the reply being regenerated, already holding its new, empty version
	// (ChatStore.NewAlternative), or nil.
	regenerated *Message
}

// turn runs one reply in a conversation: prepare saves what the turn changes (a user message,
// removed messages) once the conversation is known to be idle, then the reply is streamed and
// saved.
func (s *ChatService) turn(conversationID int64, prepare func(ctx context.Context, history []Message) (turnPlan, error)) (Message, error) {
	ctx := s.ctx
	genCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if _, busy := s.inFlight[conversationID]; busy {
		s.mu.Unlock()
		return Message{}, fmt.Errorf("send message: conversation %d is still generating; stop it or wait for the reply", conversationID)
	}
	s.inFlight[conversationID] = cancel
	s.mu.Unlock()
	defer func() { s.mu.Lock(); delete(s.inFlight, conversationID); s.mu.Unlock() }()

	settings := s.settingsFor(ctx, conversationID)
	history, err := s.store.Messages(ctx, conversationID)
	if err != nil {
		return Message{}, fmt.Errorf("load conversation %d: %w", conversationID, err)
	}
	plan, err := prepare(ctx, history)
	if err != nil {
		return Message{}, err
	}
	model := s.modelName()
	settingsJSON, _ := json.Marshal(settings)
	var asst Message
	prompt := plan.history
	switch {
	case plan.continued != nil:
		asst = *plan.continued
		asst.State, asst.StopReason, asst.Settings = StateStreaming, "", string(settingsJSON)
		if err := s.store.UpdateMessage(ctx, asst); err != nil {
			return Message{}, fmt.Errorf("mark reply %d streaming in conversation %d: %w", asst.ID, conversationID, err)
		}
	case plan.regenerated != nil:
		asst = *plan.regenerated
		asst.Model, asst.Settings = model, string(settingsJSON)
		if err := s.store.UpdateMessage(ctx, asst); err != nil {
			return Message{}, fmt.Errorf("start version %d of reply %d in conversation %d: %w", asst.AltIndex+1, asst.ID, conversationID, err)
		}
	default:
		asst, err = s.store.AddMessage(ctx, Message{ConversationID: conversationID, Role: "assistant", State: StateStreaming, Model: model, Settings: string(settingsJSON), CreatedAtMs: nowMs()})
		if err != nil {
			return Message{}, fmt.Errorf("save assistant message in conversation %d: %w", conversationID, err)
		}
	}
	s.emit.Emit(EventChat, ChatEvent{Kind: "started", ConversationID: conversationID, Conversation: plan.created, User: plan.user, Assistant: asst, AtMs: nowMs()})

	// The policy fits the history into the context before the engine sees it, so a long
	// conversation never reaches the engine's own refusal and keeps working on later messages.
	fit, fitErr := s.fitPrompt(ctx, conversationID, promptHistory(settings.SystemPrompt, prompt), settings.MaxTokens)
	if fitErr != nil {
		if plan.continued != nil {
			asst.State = StateComplete // the text it had stays; the refusal is the call's error
			s.saveReply(ctx, conversationID, asst, nil)
			return asst, fitErr
		}
		return s.finish(ctx, conversationID, asst, ChatResult{}, fitErr, false, nil)
	}
	req := ChatRequest{Messages: fit.msgs, MaxTokens: settings.MaxTokens, Sampling: settings.Sampling}
	before := asst.Content
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
			partial.Content = before + batch.text()
			if err := s.store.UpdateMessage(ctx, partial); err != nil {
				slog.Warn("save streaming reply", "conversation", conversationID, "message", asst.ID, "err", err)
			}
		}
		return nil
	})
	batch.close()
	elapsed := time.Since(start)

	text := res.Text
	if text == "" {
		text = batch.text()
	}
	asst.Content = before + text
	asst.Model = model
	asst.TTFTMs, asst.TokensPerSec = speed(res.Timings, firstAt, elapsed, pieces)
	use := &ContextUse{Used: fit.count.Tokens + res.Timings.GeneratedTokens, Context: fit.count.Context, PromptTokens: fit.count.Tokens, Dropped: fit.dropped, Policy: string(fit.policy), Evaluated: res.Timings.PromptTokens}
	if res.Timings.GeneratedTokens == 0 && pieces > 0 {
		use.Used += pieces // an engine without timings: a piece is about a token
	}
	return s.finish(ctx, conversationID, asst, res, genErr, genCtx.Err() != nil, use)
}

// finish saves the reply's final state and stop reason and announces it. A generation that
// failed saves the error's sentence as the reply's text and returns the error; one cut off by
// Stop or by the engine dying is interrupted and returns none.
func (s *ChatService) finish(ctx context.Context, conversationID int64, asst Message, res ChatResult, genErr error, stopped bool, use *ContextUse) (Message, error) {
	var fitErr *contextError
	asst.StopReason = ""
	switch {
	case genErr == nil:
		asst.State, asst.StopReason = StateComplete, string(res.Stop)
	case errors.As(genErr, &fitErr):
		asst.State, asst.Content = StateError, fitErr.Error()
	case errors.Is(genErr, ErrEngineDied) || stopped:
		asst.State = StateInterrupted
		if stopped && !errors.Is(genErr, ErrEngineDied) {
			asst.StopReason = string(engine.StopCancelled)
		}
		slog.Warn("reply interrupted", "conversation", conversationID, "message", asst.ID, "chars", len(asst.Content), "err", genErr)
	default:
		asst.State = StateError
		genErr = newReplyError(genErr)
		if asst.Content == "" {
			asst.Content = genErr.Error()
		}
	}
	if err := s.saveReply(ctx, conversationID, asst, use); err != nil {
		return asst, err
	}
	if fitErr != nil {
		return asst, fitErr
	}
	if asst.State == StateError {
		return asst, genErr // one sentence (replyError), wrapping the cause
	}
	return asst, nil
}

// saveReply writes a reply in its final state and emits the finished event.
func (s *ChatService) saveReply(ctx context.Context, conversationID int64, asst Message, use *ContextUse) error {
	// The reply is saved even when the app is shutting down: use a context that outlives ctx.
	saveCtx, saveCancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer saveCancel()
	if err := s.store.UpdateMessage(saveCtx, asst); err != nil {
		return fmt.Errorf("save reply in conversation %d: %w", conversationID, err)
	}
	s.emit.Emit(EventChat, ChatEvent{Kind: "finished", ConversationID: conversationID, Assistant: asst, Context: use, AtMs: nowMs()})
	return nil
}

func (s *ChatService) modelName() string {
	info, err := s.engine.Model(s.ctx)
	if err != nil {
		return ""
	}
	return info.Name
}

// promptHistory is the history the engine may see: the system prompt when there is one, then
// the turns with text (the last one may be a reply being continued).
func promptHistory(systemPrompt string, history []Message) []Message {
	out := make([]Message, 0, len(history)+1)
	if systemPrompt != "" {
		out = append(out, Message{Role: "system", Content: systemPrompt, State: StateComplete})
	}
	for _, m := range history {
		if m.Content == "" || m.State == StateError || m.State == StateStreaming {
			continue
		}
		out = append(out, m)
	}
	return out
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
