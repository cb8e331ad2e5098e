package store

import (
	"context"
	"strings"
	"testing"
)

// reply is a conversation with one user message and one complete reply.
func reply(t *testing.T, s *Store, text string) (conv int64, m Message) {
	t.Helper()
	ctx := context.Background()
	c, err := s.CreateConversation(ctx, "t", "m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "hi", State: StateComplete}); err != nil {
		t.Fatal(err)
	}
	m, err = s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "assistant", Content: text, State: StateComplete, StopReason: "eos"})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID, m
}

func TestRegeneratedReplyKeepsEveryVersionAndShowsTheChosenOne(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTemp(t, dir)
	conv, m := reply(t, s, "first")
	for _, text := range []string{"second", "third"} {
		alt, err := s.NewAlternative(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		if alt.Content != "" || alt.State != StateStreaming {
			t.Fatalf("new alternative: content %q state %s, want empty and streaming", alt.Content, alt.State)
		}
		alt.Content, alt.State, alt.StopReason = text, StateComplete, "length"
		if err := s.UpdateMessage(ctx, alt); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		choose  int // -1: no selection, read as is
		content string
		stop    string
	}{
		{"the last regenerated is shown", -1, "third", "length"},
		{"version 1", 0, "first", "eos"},
		{"version 2", 1, "second", "length"},
		{"back to version 3", 2, "third", "length"},
		{"version 1 again", 0, "first", "eos"},
	}
	for _, c := range cases {
		if c.choose >= 0 {
			if _, err := s.SelectAlternative(ctx, m.ID, c.choose); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		msgs, err := s.Messages(ctx, conv)
		if err != nil {
			t.Fatal(err)
		}
		got := msgs[1]
		want := c.choose
		if want < 0 {
			want = 2
		}
		if got.Content != c.content || got.StopReason != c.stop || got.AltIndex != want || got.AltCount != 3 {
			t.Errorf("%s: got %q stop %q at %d/%d, want %q stop %q at %d/3", c.name, got.Content, got.StopReason, got.AltIndex+1, got.AltCount, c.content, c.stop, want+1)
		}
	}
	// Survives a reopen; the choice holds.
	s.Close()
	s2 := openTemp(t, dir)
	msgs, err := s2.Messages(ctx, conv)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[1].Content != "first" || msgs[1].AltCount != 3 {
		t.Fatalf("after reopen: %q %d/%d, want \"first\" 1/3", msgs[1].Content, msgs[1].AltIndex+1, msgs[1].AltCount)
	}
}

func TestAlternativeRefusals(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, t.TempDir())
	conv, m := reply(t, s, "only")
	msgs, _ := s.Messages(ctx, conv)
	user := msgs[0]
	if msgs[1].AltCount != 0 {
		t.Fatalf("a reply never regenerated has %d alternatives, want 0", msgs[1].AltCount)
	}
	cases := []struct {
		name string
		do   func() error
		want string
	}{
		{"select without alternatives", func() error { _, err := s.SelectAlternative(ctx, m.ID, 0); return err }, "no alternatives"},
		{"alternative of a user message", func() error { _, err := s.NewAlternative(ctx, user.ID); return err }, "only a reply"},
		{"unknown message", func() error { _, err := s.NewAlternative(ctx, 999); return err }, "no message with id 999"},
		{"version out of range", func() error {
			alt, err := s.NewAlternative(ctx, m.ID)
			if err != nil {
				return err
			}
			alt.State = StateComplete
			if err := s.UpdateMessage(ctx, alt); err != nil {
				return err
			}
			_, err = s.SelectAlternative(ctx, m.ID, 2)
			return err
		}, "version 3 is not one of them"},
	}
	for _, c := range cases {
		err := c.do()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

func TestDeletingARepliedMessageRemovesItsAlternatives(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, t.TempDir())
	conv, m := reply(t, s, "a")
	if _, err := s.NewAlternative(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteMessages(ctx, conv, m.ID, false); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM message_alternatives").Scan(&n); err != nil || n != 0 {
		t.Fatalf("alternatives left after the delete: %d, %v; want 0", n, err)
	}
}

func TestInterruptStreamingMarksTheStreamingAlternativeToo(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, t.TempDir())
	conv, m := reply(t, s, "a")
	if _, err := s.NewAlternative(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InterruptStreaming(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SelectAlternative(ctx, m.ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SelectAlternative(ctx, m.ID, 1); err != nil {
		t.Fatal(err)
	}
	msgs, _ := s.Messages(ctx, conv)
	if msgs[1].State != StateInterrupted {
		t.Fatalf("the cut version reads %s, want interrupted", msgs[1].State)
	}
}

func TestLoadOptionsAreKeptPerModel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTemp(t, dir)
	cases := []struct{ path, opts string }{
		{"", `{"context":512}`},
		{"/m/a.gguf", `{"context":1024,"device":"cpu"}`},
		{"/m/a.gguf", `{"context":2048}`}, // replaces
	}
	for _, c := range cases {
		if err := s.SetLoadOptions(ctx, c.path, c.opts); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = openTemp(t, dir)
	want := map[string]string{"": `{"context":512}`, "/m/a.gguf": `{"context":2048}`}
	for path, w := range want {
		got, ok, err := s.LoadOptions(ctx, path)
		if err != nil || !ok || got != w {
			t.Errorf("LoadOptions(%q) = %q, %v, %v; want %q", path, got, ok, err, w)
		}
	}
	if _, ok, err := s.LoadOptions(ctx, "/m/never.gguf"); ok || err != nil {
		t.Errorf("a model never saved: ok %v err %v, want false, nil", ok, err)
	}
}
