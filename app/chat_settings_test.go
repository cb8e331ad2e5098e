package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/sample"
)

func TestConversationSettingsReachTheEngineAndStayWithTheirConversation(t *testing.T) {
	eng := &fakeEngine{pieces: []string{"ok"}}
	st, rec := newMemStore(), &recorder{}
	svc := NewChatService(context.Background(), eng, st, rec)
	tuned, err := svc.CreateConversation("tuned")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := svc.CreateConversation("plain")
	if err != nil {
		t.Fatal(err)
	}
	want := ChatSettings{
		SystemPrompt: "  You are a pirate.  ",
		MaxTokens:    12,
		Sampling:     sample.Params{Temperature: 1.3, TopK: 7, TopP: 0.8, MinP: 0.1, RepeatPenalty: 1.2, Seed: 42},
	}
	saved, err := svc.SetConversationSettings(tuned.ID, want)
	if err != nil {
		t.Fatalf("SetConversationSettings: %v", err)
	}
	if saved.SystemPrompt != "You are a pirate." {
		t.Fatalf("saved system prompt %q, want it trimmed", saved.SystemPrompt)
	}
	if _, err := svc.Send(tuned.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(plain.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	if len(eng.requests) != 2 {
		t.Fatalf("%d requests, want 2", len(eng.requests))
	}
	got := eng.requests[0]
	if got.MaxTokens != 12 || got.Sampling != want.Sampling {
		t.Fatalf("request of the tuned conversation: max %d sampling %+v, want 12 and %+v", got.MaxTokens, got.Sampling, want.Sampling)
	}
	if len(got.Messages) != 2 || got.Messages[0] != (engine.Message{Role: "system", Content: "You are a pirate."}) || got.Messages[1].Role != "user" {
		t.Fatalf("messages of the tuned conversation: %+v, want the system prompt then the user message", got.Messages)
	}
	other := eng.requests[1]
	def := DefaultChatSettings()
	if other.MaxTokens != def.MaxTokens || other.Sampling != def.Sampling || other.Messages[0].Role != "user" {
		t.Fatalf("the other conversation took %+v, want the defaults and no system prompt", other)
	}
	// The settings read back, and the reply records the ones it was made with.
	back, err := svc.ConversationSettings(tuned.ID)
	if err != nil || back != saved {
		t.Fatalf("ConversationSettings = %+v, %v; want %+v", back, err, saved)
	}
	msgs, _ := svc.Messages(tuned.ID)
	var used ChatSettings
	if err := json.Unmarshal([]byte(msgs[1].Settings), &used); err != nil || used != saved {
		t.Fatalf("the reply's settings %q (%v), want %+v", msgs[1].Settings, err, saved)
	}
}

func TestConversationSettingsOutOfRangeAreRefusedNamingTheSetting(t *testing.T) {
	svc := NewChatService(context.Background(), &fakeEngine{}, newMemStore(), &recorder{})
	c, _ := svc.CreateConversation("c")
	base := DefaultChatSettings()
	cases := []struct {
		name string
		edit func(*ChatSettings)
		want string
	}{
		{"no reply length", func(cs *ChatSettings) { cs.MaxTokens = 0 }, "max tokens 0"},
		{"negative temperature", func(cs *ChatSettings) { cs.Sampling.Temperature = -1 }, "temperature"},
		{"top-p above one", func(cs *ChatSettings) { cs.Sampling.TopP = 1.5 }, "top_p"},
		{"min-p above one", func(cs *ChatSettings) { cs.Sampling.MinP = 2 }, "min_p"},
		{"negative top-k", func(cs *ChatSettings) { cs.Sampling.TopK = -3 }, "top_k"},
		{"negative repeat penalty", func(cs *ChatSettings) { cs.Sampling.RepeatPenalty = -1 }, "repeat_penalty"},
		{"a huge system prompt", func(cs *ChatSettings) { cs.SystemPrompt = strings.Repeat("x", maxSystemPromptBytes+1) }, "system prompt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := base
			tc.edit(&cs)
			_, err := svc.SetConversationSettings(c.ID, cs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
	if got, _ := svc.ConversationSettings(c.ID); got != base {
		t.Fatalf("after the refusals the settings are %+v, want the defaults", got)
	}
}

func TestStoredSettingsThatNoLongerCheckFallBackToTheDefaults(t *testing.T) {
	st := newMemStore()
	svc := NewChatService(context.Background(), &fakeEngine{}, st, &recorder{})
	c, _ := svc.CreateConversation("c")
	for _, bad := range []string{`{"maxTokens":`, `{"maxTokens":-5}`} {
		if err := st.SetConversationSettings(context.Background(), c.ID, bad); err != nil {
			t.Fatal(err)
		}
		if got, err := svc.ConversationSettings(c.ID); err != nil || got != DefaultChatSettings() {
			t.Fatalf("settings %s read as %+v, %v; want the defaults", bad, got, err)
		}
	}
}

func TestReplyRecordsWhyItEnded(t *testing.T) {
	cases := []struct {
		name   string
		stop   engine.StopReason
		want   string
		stateW string
	}{
		{"end of text", engine.StopEOS, "eos", StateComplete},
		{"max tokens", engine.StopLength, "length", StateComplete},
		{"stop string", engine.StopString, "stop", StateComplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eng := &stopEngine{fakeEngine: fakeEngine{pieces: []string{"a", "b"}}, stop: tc.stop}
			svc := NewChatService(context.Background(), eng, newMemStore(), &recorder{})
			got, err := svc.Send(0, "hi")
			if err != nil || got.StopReason != tc.want || got.State != tc.stateW {
				t.Fatalf("reply %+v, %v; want stop reason %q, state %s", got, err, tc.want, tc.stateW)
			}
			msgs, _ := svc.Messages(got.ConversationID)
			if msgs[1].StopReason != tc.want {
				t.Fatalf("stored stop reason %q, want %q", msgs[1].StopReason, tc.want)
			}
		})
	}
	t.Run("stopped by the user", func(t *testing.T) {
		eng := &fakeEngine{pieces: []string{"a", "b", "c"}, blockAt: 1, started: make(chan struct{})}
		svc := NewChatService(context.Background(), eng, newMemStore(), &recorder{})
		c, _ := svc.CreateConversation("c")
		go func() { <-eng.started; svc.Stop(c.ID) }()
		got, err := svc.Send(c.ID, "hi")
		if err != nil || got.State != StateInterrupted || got.StopReason != "cancelled" {
			t.Fatalf("reply %+v, %v; want interrupted, stop reason cancelled", got, err)
		}
	})
}

// stopEngine is the fake engine ending its replies with a chosen stop reason.
type stopEngine struct {
	fakeEngine
	stop engine.StopReason
}

func (e *stopEngine) ChatStream(ctx context.Context, req ChatRequest, onDelta func(string) error) (ChatResult, error) {
	res, err := e.fakeEngine.ChatStream(ctx, req, onDelta)
	res.Stop = e.stop
	return res, err
}
