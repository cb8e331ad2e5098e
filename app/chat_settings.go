package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/vkllm/vkllm/engine/sample"
)

// ChatSettings are the generation settings of a conversation: its system prompt, the reply's
// length and the sampler's parameters (engine/sample). Each reply is saved with the settings it
// was made with, as JSON.
type ChatSettings struct {
	SystemPrompt string        `json:"systemPrompt"` // sent first, as the system message; "" = none
	MaxTokens    int           `json:"maxTokens"`    // the most tokens one reply may have
	Sampling     sample.Params `json:"sampling"`
}

// maxReplyTokens bounds MaxTokens: no model the app loads has a context this long.
const maxReplyTokens = 1 << 20

// maxSystemPromptBytes bounds the system prompt, which is sent with every message.
const maxSystemPromptBytes = 64 << 10

// DefaultChatSettings suit a small story model: mild temperature, nucleus sampling, a bounded reply.
func DefaultChatSettings() ChatSettings {
	return ChatSettings{MaxTokens: 256, Sampling: sample.Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05}}
}

// Validate names the first setting out of range and the range it wants.
func (cs ChatSettings) Validate() error {
	if cs.MaxTokens < 1 || cs.MaxTokens > maxReplyTokens {
		return fmt.Errorf("max tokens %d is out of range: want 1 to %d", cs.MaxTokens, maxReplyTokens)
	}
	if len(cs.SystemPrompt) > maxSystemPromptBytes {
		return fmt.Errorf("the system prompt has %d bytes: keep it under %d", len(cs.SystemPrompt), maxSystemPromptBytes)
	}
	if err := cs.Sampling.Validate(); err != nil {
		return fmt.Errorf("sampling: %w", err)
	}
	return nil
}

// DefaultSettings returns the settings a conversation without its own uses (SetSettings changes
// them).
func (s *ChatService) DefaultSettings() ChatSettings {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings
}

// ConversationSettings returns a conversation's generation settings: its own when it has them,
// else the defaults.
func (s *ChatService) ConversationSettings(conversationID int64) (ChatSettings, error) {
	c, err := s.store.Conversation(s.ctx, conversationID)
	if err != nil {
		return ChatSettings{}, fmt.Errorf("read conversation %d: %w", conversationID, err)
	}
	return s.settingsOf(c), nil
}

// SetConversationSettings checks and saves a conversation's generation settings; they apply from
// its next reply on.
func (s *ChatService) SetConversationSettings(conversationID int64, cs ChatSettings) (ChatSettings, error) {
	cs.SystemPrompt = strings.TrimSpace(cs.SystemPrompt)
	if err := cs.Validate(); err != nil {
		return ChatSettings{}, fmt.Errorf("set the generation settings of conversation %d: %w", conversationID, err)
	}
	b, err := json.Marshal(cs)
	if err != nil {
		return ChatSettings{}, fmt.Errorf("encode the generation settings of conversation %d: %w", conversationID, err)
	}
	if err := s.store.SetConversationSettings(s.ctx, conversationID, string(b)); err != nil {
		return ChatSettings{}, fmt.Errorf("set the generation settings of conversation %d: %w", conversationID, err)
	}
	return cs, nil
}

// settingsOf reads a conversation's own settings; none, or ones that no longer parse or check
// (written by another version), give the defaults.
func (s *ChatService) settingsOf(c Conversation) ChatSettings {
	defaults := s.DefaultSettings()
	if c.Settings == "" {
		return defaults
	}
	cs := defaults
	if err := json.Unmarshal([]byte(c.Settings), &cs); err != nil {
		slog.Warn("the conversation's generation settings do not parse; using the defaults", "conversation", c.ID, "err", err)
		return defaults
	}
	if err := cs.Validate(); err != nil {
		slog.Warn("the conversation's generation settings are out of range; using the defaults", "conversation", c.ID, "err", err)
		return defaults
	}
	return cs
}

// settingsFor is settingsOf for a conversation by id; a conversation that cannot be read uses the
// defaults (the reply then fails on the store anyway).
func (s *ChatService) settingsFor(ctx context.Context, conversationID int64) ChatSettings {
	c, err := s.store.Conversation(ctx, conversationID)
	if err != nil {
		return s.DefaultSettings()
	}
	return s.settingsOf(c)
}
