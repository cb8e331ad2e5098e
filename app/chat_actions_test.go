package app

import (
	"context"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
)

// scriptedEngine answers each request with the next reply of a list and records the prompts.
type scriptedEngine struct {
	fakeEngine
	replies []string
	stop    engine.StopReason
}

func (e *scriptedEngine) ChatStream(ctx context.Context, req ChatRequest, onDelta func(string) error) (ChatResult, error) {
	e.mu.Lock()
	e.requests = append(e.requests, req)
	reply := e.replies[0]
	if len(e.replies) > 1 {
		e.replies = e.replies[1:]
	}
	e.mu.Unlock()
	if err := onDelta(reply); err != nil {
		return ChatResult{}, err
	}
	stop := e.stop
	if stop == "" {
		stop = engine.StopEOS
	}
	return ChatResult{Text: reply, Stop: stop}, nil
}

func contents(msgs []Message) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, m.Role+":"+m.Content)
	}
	return strings.Join(parts, " | ")
}

func promptOf(req ChatRequest) string {
	var parts []string
	for _, m := range req.Messages {
		parts = append(parts, m.Role+":"+m.Content)
	}
	return strings.Join(parts, " | ")
}

// twoTurns is a conversation of two answered messages on a scripted engine.
func twoTurns(t *testing.T, replies ...string) (*ChatService, *scriptedEngine, int64, []Message) {
	t.Helper()
	eng := &scriptedEngine{replies: append([]string{"r1", "r2"}, replies...)}
	svc := NewChatService(context.Background(), eng, newMemStore(), &recorder{})
	first, err := svc.Send(0, "q1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Send(first.ConversationID, "q2"); err != nil {
		t.Fatal(err)
	}
	msgs, _ := svc.Messages(first.ConversationID)
	if got := contents(msgs); got != "user:q1 | assistant:r1 | user:q2 | assistant:r2" {
		t.Fatalf("setup: %s", got)
	}
	return svc, eng, first.ConversationID, msgs
}

func TestRegenerateKeepsTheEarlierReplyAsAnAlternativeAndDropsWhatFollowed(t *testing.T) {
	svc, eng, conv, msgs := twoTurns(t, "r1 again")
	got, err := svc.Regenerate(conv, msgs[1].ID)
	if err != nil {
		t.Fatalf("Regenerate: %v", err)
	}
	if got.ID != msgs[1].ID || got.Content != "r1 again" || got.State != StateComplete || got.AltIndex != 1 || got.AltCount != 2 {
		t.Fatalf("new reply %+v, want the same message holding version 2 of 2", got)
	}
	if p := promptOf(eng.requests[2]); p != "user:q1" {
		t.Fatalf("the regenerated reply answered %q, want only the first question", p)
	}
	after, _ := svc.Messages(conv)
	if c := contents(after); c != "user:q1 | assistant:r1 again" {
		t.Fatalf("after regenerate: %s", c)
	}
	if _, err := svc.Regenerate(conv, after[0].ID); err == nil || !strings.Contains(err.Error(), "user message") {
		t.Fatalf("regenerating a user message: %v, want a refusal naming its role", err)
	}
	if _, err := svc.Regenerate(conv, msgs[3].ID); err == nil || !strings.Contains(err.Error(), "no such message") {
		t.Fatalf("regenerating a deleted reply: %v, want no such message", err)
	}
}

func TestAlternativesFlipAndTheChosenOneIsWhatLaterTurnsSee(t *testing.T) {
	svc, eng, conv, msgs := twoTurns(t, "r2 b", "r2 c", "r3")
	reply := msgs[3].ID
	for range 2 {
		if _, err := svc.Regenerate(conv, reply); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		index int
		want  string
	}{
		{"version 1", 0, "r2"},
		{"version 2", 1, "r2 b"},
		{"version 3", 2, "r2 c"},
		{"version 2 again", 1, "r2 b"},
	}
	for _, c := range cases {
		got, err := svc.SelectAlternative(conv, reply, c.index)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Content != c.want || got.AltIndex != c.index || got.AltCount != 3 {
			t.Errorf("%s: %q at %d/%d, want %q at %d/3", c.name, got.Content, got.AltIndex+1, got.AltCount, c.want, c.index+1)
		}
	}
	if _, err := svc.Send(conv, "q3"); err != nil {
		t.Fatal(err)
	}
	last := eng.requests[len(eng.requests)-1]
	if p := promptOf(last); p != "user:q1 | assistant:r1 | user:q2 | assistant:r2 b | user:q3" {
		t.Fatalf("the next turn saw %q, want the chosen version r2 b", p)
	}
	refusals := []struct {
		name  string
		id    int64
		index int
		want  string
	}{
		{"a user message", msgs[0].ID, 0, "user message"},
		{"a version that is not there", reply, 5, "version 6 is not one of them"},
		{"an unknown message", 999, 0, "no such message"},
	}
	for _, r := range refusals {
		if _, err := svc.SelectAlternative(conv, r.id, r.index); err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: %v, want a refusal saying %q", r.name, err, r.want)
		}
	}
}

func TestEditResendsTheChangedMessageInPlace(t *testing.T) {
	svc, eng, conv, msgs := twoTurns(t, "r1 edited")
	got, err := svc.Edit(conv, msgs[0].ID, "  q1 changed ")
	if err != nil {
		t.Fatalf("Edit: %v", err)
	}
	if got.Content != "r1 edited" {
		t.Fatalf("reply to the edit %+v", got)
	}
	if p := promptOf(eng.requests[2]); p != "user:q1 changed" {
		t.Fatalf("the edit's prompt %q, want only the changed message", p)
	}
	after, _ := svc.Messages(conv)
	if c := contents(after); c != "user:q1 changed | assistant:r1 edited" {
		t.Fatalf("after edit: %s", c)
	}
	if _, err := svc.Edit(conv, after[1].ID, "x"); err == nil || !strings.Contains(err.Error(), "assistant message") {
		t.Fatalf("editing a reply: %v, want a refusal naming its role", err)
	}
	if _, err := svc.Edit(conv, after[0].ID, "   "); err == nil {
		t.Fatal("an edit to empty text was accepted")
	}
}

func TestContinueAppendsToTheLastReply(t *testing.T) {
	svc, eng, conv, msgs := twoTurns(t, " and more")
	got, err := svc.Continue(conv, msgs[3].ID)
	if err != nil {
		t.Fatalf("Continue: %v", err)
	}
	if got.ID != msgs[3].ID || got.Content != "r2 and more" || got.StopReason != "eos" {
		t.Fatalf("continued reply %+v, want the same message with the new text appended", got)
	}
	if p := promptOf(eng.requests[2]); p != "user:q1 | assistant:r1 | user:q2 | assistant:r2" {
		t.Fatalf("the continuation's prompt %q, want the whole conversation ending with the reply", p)
	}
	after, _ := svc.Messages(conv)
	if c := contents(after); c != "user:q1 | assistant:r1 | user:q2 | assistant:r2 and more" {
		t.Fatalf("after continue: %s", c)
	}
	if _, err := svc.Continue(conv, msgs[1].ID); err == nil || !strings.Contains(err.Error(), "last reply") {
		t.Fatalf("continuing an earlier reply: %v, want a refusal", err)
	}
}

func TestDeleteMessageRemovesOnlyThatMessage(t *testing.T) {
	svc, eng, conv, msgs := twoTurns(t, "r3")
	if err := svc.DeleteMessage(conv, msgs[1].ID); err != nil {
		t.Fatalf("DeleteMessage: %v", err)
	}
	after, _ := svc.Messages(conv)
	if c := contents(after); c != "user:q1 | user:q2 | assistant:r2" {
		t.Fatalf("after delete: %s", c)
	}
	if _, err := svc.Send(conv, "q3"); err != nil {
		t.Fatal(err)
	}
	if p := promptOf(eng.requests[2]); p != "user:q1 | user:q2 | assistant:r2 | user:q3" {
		t.Fatalf("the next prompt %q still has the deleted reply", p)
	}
	if err := svc.DeleteMessage(conv, msgs[1].ID); err == nil {
		t.Fatal("deleting a message twice succeeded")
	}
}
