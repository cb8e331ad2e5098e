package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
)

func words(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "w" + string(rune('a'+i%26)) + " "
	}
	return out
}

func TestSendStreamsDeltasThatAddUpToTheSavedReply(t *testing.T) {
	eng := &fakeEngine{pieces: []string{"Once", " upon", " a", " time"}, pause: 5 * time.Millisecond, model: engine.ModelInfo{Name: "stories"}}
	st, rec := newMemStore(), &recorder{}
	svc := NewChatService(context.Background(), eng, st, rec)

	got, err := svc.Send(0, "Tell me a story")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got.Content != "Once upon a time" || got.State != StateComplete || got.Model != "stories" {
		t.Fatalf("reply = %+v, want the full text, complete, model stories", got)
	}
	var streamed strings.Builder
	for _, d := range rec.deltas() {
		if d.MessageID != got.ID || d.Kind != "delta" {
			t.Fatalf("delta %+v is not for message %d", d, got.ID)
		}
		streamed.WriteString(d.Text)
	}
	if streamed.String() != got.Content {
		t.Fatalf("deltas add up to %q, reply is %q", streamed.String(), got.Content)
	}
	msgs, _ := st.Messages(context.Background(), got.ConversationID)
	if len(msgs) != 2 || msgs[0].Role != "user" || msgs[0].Content != "Tell me a story" || msgs[1].Content != got.Content {
		t.Fatalf("stored messages = %+v, want the user message then the reply", msgs)
	}
	evs := rec.chatEvents()
	if len(evs) != 2 || evs[0].Kind != "started" || evs[0].Conversation == nil || evs[1].Kind != "finished" {
		t.Fatalf("chat events = %+v, want started (with the new conversation) then finished", evs)
	}
}

func TestSendBatchesFastTokensIntoFewerEvents(t *testing.T) {
	eng := &fakeEngine{pieces: words(400)}
	st, rec := newMemStore(), &recorder{}
	svc := NewChatService(context.Background(), eng, st, rec)
	got, err := svc.Send(0, "go")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	n := len(rec.deltas())
	if n == 0 || n >= 400 {
		t.Fatalf("%d delta events for 400 instant tokens, want between 1 and 399", n)
	}
	if len(got.Content) != 400*3 {
		t.Fatalf("reply has %d bytes, want %d", len(got.Content), 400*3)
	}
}

func TestEngineDeathSavesReplyAsInterruptedWithPartialText(t *testing.T) {
	eng := &fakeEngine{pieces: []string{"The", " cat", " sat"}, dieAfter: 2}
	st, rec := newMemStore(), &recorder{}
	svc := NewChatService(context.Background(), eng, st, rec)
	got, err := svc.Send(0, "hi")
	if err != nil {
		t.Fatalf("Send returned %v, want the interrupted reply without an error", err)
	}
	if got.State != StateInterrupted || got.Content != "The cat" {
		t.Fatalf("reply = %q (%s), want %q interrupted", got.Content, got.State, "The cat")
	}
	msgs, _ := st.Messages(context.Background(), got.ConversationID)
	if msgs[1].State != StateInterrupted || msgs[1].Content != "The cat" {
		t.Fatalf("stored reply = %+v, want the partial text saved as interrupted", msgs[1])
	}
	// The next message works and sees the partial reply in its history.
	eng.dieAfter = 0
	if _, err := svc.Send(got.ConversationID, "again"); err != nil {
		t.Fatalf("next Send: %v", err)
	}
	last := eng.requests[len(eng.requests)-1].Messages
	if len(last) != 3 || last[1].Content != "The cat" || last[2].Content != "again" {
		t.Fatalf("second request history = %+v, want user, partial reply, new message", last)
	}
}

func TestStopInterruptsARunningGeneration(t *testing.T) {
	started := make(chan struct{})
	eng := &fakeEngine{pieces: []string{"a", "b", "c"}, blockAt: 1, started: started}
	st, rec := newMemStore(), &recorder{}
	svc := NewChatService(context.Background(), eng, st, rec)
	conv, _ := svc.CreateConversation("")
	done := make(chan Message)
	go func() {
		m, err := svc.Send(conv.ID, "hi")
		if err != nil {
			t.Errorf("Send: %v", err)
		}
		done <- m
	}()
	<-started
	if !svc.Stop(conv.ID) {
		t.Fatal("Stop found no running generation")
	}
	m := <-done
	if m.State != StateInterrupted || m.Content != "a" {
		t.Fatalf("stopped reply = %q (%s), want %q interrupted", m.Content, m.State, "a")
	}
	if svc.Stop(conv.ID) {
		t.Fatal("Stop after the reply ended still found a generation")
	}
}

func TestSendRefusesBadInput(t *testing.T) {
	eng := &fakeEngine{pieces: []string{"x"}}
	svc := NewChatService(context.Background(), eng, newMemStore(), &recorder{})
	if _, err := svc.Send(0, "   "); err == nil {
		t.Fatal("empty message accepted")
	}
	if _, err := svc.Send(42, "hi"); err == nil {
		t.Fatal("message to a missing conversation accepted")
	}
}

func TestEngineErrorSavesReplyAsError(t *testing.T) {
	eng := &fakeEngine{failWith: errors.New("model not loaded")}
	st := newMemStore()
	svc := NewChatService(context.Background(), eng, st, &recorder{})
	got, err := svc.Send(0, "hi")
	if err == nil || err.Error() != "Model not loaded." || !errors.Is(err, eng.failWith) {
		t.Fatalf("err = %v, want the engine's error as one sentence, wrapping it", err)
	}
	if got.Content != "Model not loaded." {
		t.Fatalf("reply text %q, want the sentence", got.Content)
	}
	if got.State != StateError {
		t.Fatalf("reply state = %s, want error", got.State)
	}
}

func TestReplySpeedPrefersEngineTimings(t *testing.T) {
	cases := []struct {
		name     string
		timings  engine.Timings
		first    time.Duration
		elapsed  time.Duration
		pieces   int
		wantTTFT int64
		wantTPS  float64
	}{
		{"engine reports both", engine.Timings{TimeToFirst: 120 * time.Millisecond, GenPerSec: 55.5}, time.Second, 2 * time.Second, 10, 120, 55.5},
		{"engine reports token count and time", engine.Timings{GeneratedTokens: 11, Generation: 500 * time.Millisecond}, 40 * time.Millisecond, time.Second, 11, 40, 22},
		{"nothing reported: measured from pieces", engine.Timings{}, 100 * time.Millisecond, 1100 * time.Millisecond, 21, 100, 20},
		{"one piece has no rate", engine.Timings{}, 10 * time.Millisecond, 10 * time.Millisecond, 1, 10, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ttft, tps := speed(c.timings, c.first, c.elapsed, c.pieces)
			if ttft != c.wantTTFT || tps != c.wantTPS {
				t.Fatalf("speed = %d ms, %.2f tok/s; want %d ms, %.2f tok/s", ttft, tps, c.wantTTFT, c.wantTPS)
			}
		})
	}
}

func TestDeleteConversationRemovesItsMessages(t *testing.T) {
	eng := &fakeEngine{pieces: []string{"x"}}
	st := newMemStore()
	svc := NewChatService(context.Background(), eng, st, &recorder{})
	m, err := svc.Send(0, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteConversation(m.ConversationID); err != nil {
		t.Fatal(err)
	}
	convs, _ := svc.ListConversations()
	msgs, _ := svc.Messages(m.ConversationID)
	if len(convs) != 0 || len(msgs) != 0 {
		t.Fatalf("after delete: %d conversations, %d messages; want none", len(convs), len(msgs))
	}
}

func TestLongRepliesAreSavedWhileStreaming(t *testing.T) {
	started := make(chan struct{})
	eng := &fakeEngine{pieces: []string{"a", "b", "c"}, pause: 600 * time.Millisecond, blockAt: 3, started: started}
	st := newMemStore()
	svc := NewChatService(context.Background(), eng, st, &recorder{})
	conv, _ := svc.CreateConversation("")
	done := make(chan struct{})
	go func() { defer close(done); _, _ = svc.Send(conv.ID, "hi") }()
	<-started
	deadline := time.Now().Add(15 * time.Second)
	var saved Message
	for time.Now().Before(deadline) {
		msgs, _ := st.Messages(context.Background(), conv.ID)
		if len(msgs) == 2 && msgs[1].Content != "" {
			saved = msgs[1]
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if saved.State != StateStreaming || !strings.HasPrefix("abc", saved.Content) {
		t.Fatalf("reply in the store mid-stream = %q (%s), want a prefix of the text, streaming", saved.Content, saved.State)
	}
	svc.Stop(conv.ID)
	<-done
}
