// Package app holds the services the desktop window and the browser-mode server bind: plain Go
// structs whose exported methods the UI calls. Nothing here imports Wails; events leave through an
// injected Emitter, and the engine and the store come in as the small interfaces below, so tests
// use fakes and main.go wires the real sidecar supervisor and SQLite store.
//
// Events travel on one channel per domain (chat:*, engine:*, bench:*); each payload is a struct
// with a Kind, and every timestamp is int64 milliseconds since the Unix epoch.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/sample"
)

// Emitter delivers one named event with its payload to the UI. In the window it is Wails'
// runtime.EventsEmit; in browser mode it is the server-sent-events hub.
type Emitter interface {
	Emit(name string, payload any)
}

// EmitterFunc adapts a function to Emitter.
type EmitterFunc func(name string, payload any)

// Emit calls f.
func (f EmitterFunc) Emit(name string, payload any) { f(name, payload) }

// Event names, one channel per domain.
const (
	EventChat   = "chat:event"
	EventDelta  = "chat:delta"
	EventEngine = "engine:event"
	EventBench  = "bench:event"
)

// ErrEngineDied marks a generation cut off because the engine process died; the adapter over the
// sidecar supervisor wraps its own error with it.
var ErrEngineDied = errors.New("engine process died during generation")

// ChatRequest is one chat generation as the engine sees it.
type ChatRequest struct {
	Messages  []engine.Message
	MaxTokens int
	Sampling  sample.Params
	Stop      []string
}

// ChatResult is what a generation produced, partial text included when it was cut off.
type ChatResult struct {
	Text    string
	Stop    engine.StopReason
	Timings engine.Timings
}

// PlanRequest asks the engine how a model would be placed on a device (the body of the
// sidecar's POST /vkllm/plan).
type PlanRequest struct {
	Model     string `json:"model"`            // GGUF path; "" plans the loaded model
	Ctx       int    `json:"ctx"`              // requested context; 0 = the model's own
	CtxStrict bool   `json:"ctx_strict"`       // decline instead of shrinking the context
	VRAMMB    int    `json:"vram_mb"`          // a pin for this plan only; 0 = none
	Device    *int   `json:"device,omitempty"` // Vulkan device index; nil = the engine's choice
}

// Engine is everything the app asks of the engine process. *sidecar.Supervisor satisfies it
// through a thin adapter in main.go.
type Engine interface {
	// ChatStream generates a reply, calling onDelta with each piece of text as it arrives. When
	// the engine dies mid-stream it returns the partial text and an error wrapping ErrEngineDied.
	ChatStream(ctx context.Context, req ChatRequest, onDelta func(delta string) error) (ChatResult, error)
	Model(ctx context.Context) (engine.ModelInfo, error)
	LoadModel(ctx context.Context, path string) (engine.ModelInfo, error)
	Devices(ctx context.Context) (json.RawMessage, error)
	Plan(ctx context.Context, req PlanRequest) (json.RawMessage, error)
	// PromptTokens counts the tokens msgs render to with the loaded model's chat template, as
	// ChatStream would send them, and says the context they have to fit.
	PromptTokens(ctx context.Context, msgs []engine.Message) (PromptCount, error)
}

// Conversation is one chat thread as the UI lists it.
type Conversation struct {
	ID          int64  `json:"id"`
	Title       string `json:"title"`
	Model       string `json:"model"`
	CreatedAtMs int64  `json:"createdAtMs"`
	UpdatedAtMs int64  `json:"updatedAtMs"`
	// ContextPolicy is what the chat does once its history outgrows the context (a
	// ContextPolicy; "" reads as the default, the rolling window).
	ContextPolicy string `json:"contextPolicy"`
	// Settings are the conversation's own generation settings as JSON ("" = the defaults);
	// ChatService.ConversationSettings gives them to the UI parsed.
	Settings string `json:"-"`
	// Snippet is the text around a search hit's match ("" when the title matched, and outside
	// a search).
	Snippet string `json:"snippet,omitempty"`
}

// Message states.
const (
	StateComplete    = "complete"
	StateStreaming   = "streaming"
	StateInterrupted = "interrupted"
	StateError       = "error"
)

// Message is one turn of a conversation with the figures shown under a reply.
type Message struct {
	ID             int64   `json:"id"`
	ConversationID int64   `json:"conversationId"`
	Role           string  `json:"role"`
	Content        string  `json:"content"`
	State          string  `json:"state"`
	Model          string  `json:"model"`
	TokensPerSec   float64 `json:"tokensPerSec"`
	TTFTMs         int64   `json:"ttftMs"`
	Settings       string  `json:"settings"` // JSON of the sampling settings used
	CreatedAtMs    int64   `json:"createdAtMs"`
	// StopReason says why a reply ended: "eos" (the model's end of text), "length" (max tokens
	// or the context), "stop" (a stop string), "cancelled" (Stop); "" = unknown or a user message.
	StopReason string `json:"stopReason"`
	// AltIndex is which version of a regenerated reply this is (0-based) and AltCount how many
	// versions it has; 0 = never regenerated (ChatService.SelectAlternative flips between them).
	AltIndex int `json:"altIndex"`
	AltCount int `json:"altCount"`
}

// ChatStore keeps conversations and messages; *store.Store satisfies it through main.go's adapter.
type ChatStore interface {
	CreateConversation(ctx context.Context, title, model string) (Conversation, error)
	ListConversations(ctx context.Context) ([]Conversation, error)
	DeleteConversation(ctx context.Context, id int64) error
	Conversation(ctx context.Context, id int64) (Conversation, error)
	SetContextPolicy(ctx context.Context, id int64, policy string) error
	SetConversationSettings(ctx context.Context, id int64, settings string) error
	// DeleteMessages removes message fromID of a conversation and, with andLater, every later one.
	DeleteMessages(ctx context.Context, conversationID, fromID int64, andLater bool) (int64, error)
	AddMessage(ctx context.Context, m Message) (Message, error)
	UpdateMessage(ctx context.Context, m Message) error
	Messages(ctx context.Context, conversationID int64) ([]Message, error)
	RenameConversation(ctx context.Context, id int64, title string) error
	// SearchConversations lists the conversations not in the trash whose title or messages
	// hold text's words (the last as a prefix), best match first, with the matching text as
	// Snippet.
	SearchConversations(ctx context.Context, text string) ([]Conversation, error)
	// TrashConversation hides a conversation until RestoreConversation or DeleteConversation;
	// the store removes what is left in the trash when it next opens.
	TrashConversation(ctx context.Context, id int64) error
	RestoreConversation(ctx context.Context, id int64) error
	// NewAlternative keeps the version a reply holds as an alternative and makes the message a
	// new, empty version in state streaming (the last); SelectAlternative makes version n the
	// one the message holds. Messages gives each reply's AltIndex and AltCount.
	NewAlternative(ctx context.Context, messageID int64) (Message, error)
	SelectAlternative(ctx context.Context, messageID int64, n int) (Message, error)
}

// Pin is a VRAM cap a user set for one GPU.
type Pin struct {
	DeviceKey string `json:"deviceKey"`
	MB        int    `json:"mb"`
}

// PinStore keeps the per-GPU VRAM pins.
type PinStore interface {
	SetPin(ctx context.Context, deviceKey string, mb int) error
	ListPins(ctx context.Context) ([]Pin, error)
	ClearPin(ctx context.Context, deviceKey string) error
}

// EngineEvent is the payload of engine:event: the engine process started, restarted or stopped,
// or a different model was loaded.
type EngineEvent struct {
	Kind   string            `json:"kind"` // "started" | "restarted" | "stopped" | "model"
	Reason string            `json:"reason,omitempty"`
	Model  *engine.ModelInfo `json:"model,omitempty"`
	AtMs   int64             `json:"atMs"`
}

// EmitEngineEvent forwards a supervisor event ("engine:restarted" and friends, or a bare kind) to
// the UI.
func EmitEngineEvent(em Emitter, kind, reason string, atMs int64) {
	if atMs == 0 {
		atMs = nowMs()
	}
	em.Emit(EventEngine, EngineEvent{Kind: trimDomain(kind), Reason: reason, AtMs: atMs})
}

func trimDomain(kind string) string {
	const prefix = "engine:"
	if len(kind) > len(prefix) && kind[:len(prefix)] == prefix {
		return kind[len(prefix):]
	}
	return kind
}

func nowMs() int64 { return time.Now().UnixMilli() }
