package app

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// fakeEngine streams a fixed list of pieces, optionally dying after some of them or waiting for
// cancellation, and records the requests it saw.
type fakeEngine struct {
	pieces    []string
	pause     time.Duration // between pieces
	dieAfter  int           // >0: fail with ErrEngineDied after this many pieces
	blockAt   int           // >0: after this many pieces wait until the context ends
	timings   engine.Timings
	failWith  error
	model     engine.ModelInfo
	mu        sync.Mutex
	requests  []ChatRequest
	loadPaths []string
	started   chan struct{} // closed at the first piece when not nil
	context   int           // positions the fake context holds; 0 = 4096
	counts    int           // PromptTokens calls
}

// fakeTokens is the fake engine's token count of a chat: a word is a token, and each message
// costs two more (its role and its end), as a chat template's markup would.
func fakeTokens(msgs []engine.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(strings.Fields(m.Content)) + 2
	}
	return n
}

func (f *fakeEngine) PromptTokens(_ context.Context, msgs []engine.Message) (PromptCount, error) {
	f.mu.Lock()
	f.counts++
	f.mu.Unlock()
	nctx := f.context
	if nctx == 0 {
		nctx = 4096
	}
	n := fakeTokens(msgs)
	return PromptCount{Tokens: min(n, nctx+1), Context: nctx, TooLong: n > nctx}, nil
}

// ChatStream fails like the real engine when the prompt does not fit the context.
func (f *fakeEngine) checkFits(req ChatRequest) error {
	c, _ := f.PromptTokens(context.Background(), req.Messages)
	if c.TooLong || c.Tokens >= c.Context {
		return fmt.Errorf("engine chat: the prompt has %d tokens but the context holds %d; shorten it or load the model with a larger context (--ctx)", c.Tokens, c.Context)
	}
	return nil
}

func (f *fakeEngine) ChatStream(ctx context.Context, req ChatRequest, onDelta func(string) error) (ChatResult, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if f.failWith != nil {
		return ChatResult{}, f.failWith
	}
	if err := f.checkFits(req); err != nil {
		return ChatResult{}, err
	}
	var text string
	for i, p := range f.pieces {
		if f.dieAfter > 0 && i == f.dieAfter {
			return ChatResult{Text: text}, fmt.Errorf("read stream: unexpected EOF: %w", ErrEngineDied)
		}
		if f.blockAt > 0 && i == f.blockAt {
			<-ctx.Done()
			return ChatResult{Text: text, Stop: engine.StopCancelled}, ctx.Err()
		}
		if f.pause > 0 {
			time.Sleep(f.pause)
		}
		text += p
		if err := onDelta(p); err != nil {
			return ChatResult{Text: text}, err
		}
		if i == 0 && f.started != nil {
			close(f.started)
		}
	}
	return ChatResult{Text: text, Stop: engine.StopEOS, Timings: f.timings}, nil
}

func (f *fakeEngine) Model(context.Context) (engine.ModelInfo, error) { return f.model, nil }

func (f *fakeEngine) LoadModel(_ context.Context, path string) (engine.ModelInfo, error) {
	f.loadPaths = append(f.loadPaths, path)
	f.model = engine.ModelInfo{Name: path, Path: path}
	return f.model, nil
}

func (f *fakeEngine) Devices(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{"devices":[{"name":"fake"}]}`), nil
}

func (f *fakeEngine) Plan(_ context.Context, req PlanRequest) (json.RawMessage, error) {
	return json.Marshal(map[string]any{"path": req.Model, "ctx": req.Ctx})
}

// memStore is an in-memory ChatStore and PinStore.
type memStore struct {
	mu     sync.Mutex
	nextID int64
	convs  map[int64]Conversation
	trash  map[int64]Conversation
	msgs   map[int64]Message
	alts   map[int64][]Message // message id -> its versions
	pins   map[string]int
}

func newMemStore() *memStore {
	return &memStore{convs: map[int64]Conversation{}, trash: map[int64]Conversation{}, msgs: map[int64]Message{}, alts: map[int64][]Message{}, pins: map[string]int{}}
}

func (s *memStore) CreateConversation(_ context.Context, title, model string) (Conversation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	c := Conversation{ID: s.nextID, Title: title, Model: model, CreatedAtMs: nowMs(), UpdatedAtMs: nowMs(), ContextPolicy: string(PolicyRolling)}
	s.convs[c.ID] = c
	return c, nil
}

func (s *memStore) ListConversations(context.Context) ([]Conversation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Conversation
	for _, c := range s.convs {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID > out[j].ID })
	return out, nil
}

func (s *memStore) DeleteConversation(_ context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, listed := s.convs[id]
	_, trashed := s.trash[id]
	if !listed && !trashed {
		return fmt.Errorf("conversation %d not found", id)
	}
	delete(s.convs, id)
	delete(s.trash, id)
	for mid, m := range s.msgs {
		if m.ConversationID == id {
			delete(s.msgs, mid)
		}
	}
	return nil
}

func (s *memStore) Conversation(_ context.Context, id int64) (Conversation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	if !ok {
		return Conversation{}, fmt.Errorf("conversation %d not found", id)
	}
	return c, nil
}

func (s *memStore) SetContextPolicy(_ context.Context, id int64, policy string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	if !ok {
		return fmt.Errorf("conversation %d not found", id)
	}
	c.ContextPolicy = policy
	s.convs[id] = c
	return nil
}

func (s *memStore) SetConversationSettings(_ context.Context, id int64, settings string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	if !ok {
		return fmt.Errorf("conversation %d not found", id)
	}
	c.Settings = settings
	s.convs[id] = c
	return nil
}

func (s *memStore) DeleteMessages(_ context.Context, conv, fromID int64, andLater bool) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.msgs[fromID]; !ok || m.ConversationID != conv {
		return 0, fmt.Errorf("no message with id %d in conversation %d", fromID, conv)
	}
	var n int64
	for id, m := range s.msgs {
		if m.ConversationID == conv && (id == fromID || (andLater && id > fromID)) {
			delete(s.msgs, id)
			n++
		}
	}
	return n, nil
}

func (s *memStore) AddMessage(_ context.Context, m Message) (Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.convs[m.ConversationID]; !ok {
		return Message{}, fmt.Errorf("conversation %d not found", m.ConversationID)
	}
	s.nextID++
	m.ID = s.nextID
	s.msgs[m.ID] = m
	return m, nil
}

func (s *memStore) UpdateMessage(_ context.Context, m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.msgs[m.ID]; !ok {
		return fmt.Errorf("message %d not found", m.ID)
	}
	s.msgs[m.ID] = m
	if vs := s.alts[m.ID]; m.AltIndex < len(vs) {
		vs[m.AltIndex] = m
	}
	return nil
}

func (s *memStore) Messages(_ context.Context, conv int64) ([]Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs {
		if m.ConversationID == conv {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s *memStore) SetPin(_ context.Context, key string, mb int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pins[key] = mb
	return nil
}

func (s *memStore) ListPins(context.Context) ([]Pin, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Pin
	for k, mb := range s.pins {
		out = append(out, Pin{DeviceKey: k, MB: mb})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DeviceKey < out[j].DeviceKey })
	return out, nil
}

func (s *memStore) ClearPin(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pins, key)
	return nil
}

// recorder is an Emitter that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

type recorded struct {
	name    string
	payload any
}

func (r *recorder) Emit(name string, payload any) {
	r.mu.Lock()
	r.events = append(r.events, recorded{name, payload})
	r.mu.Unlock()
}

func (r *recorder) deltas() []ChatDelta {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ChatDelta
	for _, e := range r.events {
		if d, ok := e.payload.(ChatDelta); ok {
			out = append(out, d)
		}
	}
	return out
}

func (r *recorder) chatEvents() []ChatEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ChatEvent
	for _, e := range r.events {
		if c, ok := e.payload.(ChatEvent); ok {
			out = append(out, c)
		}
	}
	return out
}

func (s *memStore) RenameConversation(_ context.Context, id int64, title string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	if !ok {
		return fmt.Errorf("conversation %d not found", id)
	}
	c.Title = title
	s.convs[id] = c
	return nil
}

func (s *memStore) SearchConversations(ctx context.Context, text string) ([]Conversation, error) {
	all, _ := s.ListConversations(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	text = strings.ToLower(text)
	var out []Conversation
	for _, c := range all {
		hit := strings.Contains(strings.ToLower(c.Title), text)
		for _, m := range s.msgs {
			hit = hit || (m.ConversationID == c.ID && strings.Contains(strings.ToLower(m.Content), text))
		}
		if hit {
			out = append(out, c)
		}
	}
	return out, nil
}

func (s *memStore) TrashConversation(_ context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.convs[id]
	if !ok {
		return fmt.Errorf("conversation %d not found", id)
	}
	delete(s.convs, id)
	s.trash[id] = c
	return nil
}

func (s *memStore) RestoreConversation(_ context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.trash[id]
	if !ok {
		return fmt.Errorf("no conversation in the trash with id %d", id)
	}
	delete(s.trash, id)
	s.convs[id] = c
	return nil
}

func (s *memStore) NewAlternative(_ context.Context, id int64) (Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[id]
	if !ok {
		return Message{}, fmt.Errorf("no message with id %d", id)
	}
	vs := s.alts[id]
	if len(vs) == 0 {
		vs = []Message{m}
	}
	vs[m.AltIndex] = m
	m.Content, m.State, m.StopReason, m.AltIndex = "", StateStreaming, "", len(vs)
	vs = append(vs, m)
	m.AltCount = len(vs)
	for i := range vs {
		vs[i].AltCount = len(vs)
	}
	s.alts[id], s.msgs[id] = vs, m
	return m, nil
}

func (s *memStore) SelectAlternative(_ context.Context, id int64, n int) (Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[id]
	vs := s.alts[id]
	if !ok || n < 0 || n >= len(vs) {
		return Message{}, fmt.Errorf("message %d has %d versions; version %d is not one of them", id, len(vs), n+1)
	}
	vs[m.AltIndex] = m
	s.msgs[id] = vs[n]
	return vs[n], nil
}
