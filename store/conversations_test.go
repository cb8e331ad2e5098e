package store

import (
	"context"
	"testing"
)

func TestSearchWithoutFTS5ScansTitlesAndMessagesWithLikeAndSkipsTheTrash(t *testing.T) {
	ctx := context.Background()
	s := openWithoutFTS5(t, t.TempDir())
	mk := func(title string, texts ...string) int64 {
		c, err := s.CreateConversation(ctx, title, "m")
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range texts {
			if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: tx, State: StateComplete}); err != nil {
				t.Fatal(err)
			}
		}
		return c.ID
	}
	dragon := mk("Stories", "tell me about a Dragon named Ember")
	recipe := mk("Dragon fruit recipes", "how ripe?")
	percent := mk("Maths", "what is 50% of 8?")
	trashed := mk("Old", "another dragon")
	if err := s.TrashConversation(ctx, trashed); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		query string
		want  []int64
	}{
		{"dragon", []int64{recipe, dragon}}, // title and message text, any case
		{"EMBER", []int64{dragon}},          // message text only
		{"50%", []int64{percent}},           // % matches itself
		{"5_%", nil},                        // _ matches itself, not any character
		{"nothing like this", nil},          // no match
	}
	for _, c := range cases {
		got, err := s.SearchConversations(ctx, c.query)
		if err != nil {
			t.Fatalf("search %q: %v", c.query, err)
		}
		var ids []int64
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		if len(ids) != len(c.want) {
			t.Fatalf("search %q = %v, want %v", c.query, ids, c.want)
		}
		for i := range ids {
			if ids[i] != c.want[i] {
				t.Fatalf("search %q = %v, want %v", c.query, ids, c.want)
			}
		}
	}
}

func TestTrashHidesRestoreBringsBackAndReopenPurges(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTemp(t, dir)
	keep, _ := s.CreateConversation(ctx, "keep", "m")
	undo, _ := s.CreateConversation(ctx, "undo", "m")
	gone, _ := s.CreateConversation(ctx, "gone", "m")
	if _, err := s.AddMessage(ctx, Message{ConversationID: gone.ID, Role: "user", Content: "bye", State: StateComplete}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{undo.ID, gone.ID} {
		if err := s.TrashConversation(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if list, _ := s.ListConversations(ctx); len(list) != 1 || list[0].ID != keep.ID {
		t.Fatalf("list with two in the trash = %+v, want only %q", list, "keep")
	}
	if err := s.RestoreConversation(ctx, undo.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RestoreConversation(ctx, keep.ID); err == nil {
		t.Fatal("restoring a conversation that is not in the trash succeeded; want an error")
	}
	if list, _ := s.ListConversations(ctx); len(list) != 2 {
		t.Fatalf("list after restore = %+v, want keep and undo", list)
	}
	s.Close()

	s = openTemp(t, dir)
	if _, err := s.Conversation(ctx, gone.ID); err == nil {
		t.Fatal("a conversation left in the trash survived reopening the store")
	}
	if msgs, _ := s.Messages(ctx, gone.ID); len(msgs) != 0 {
		t.Fatalf("messages of the purged conversation remain: %+v", msgs)
	}
	if list, _ := s.ListConversations(ctx); len(list) != 2 {
		t.Fatalf("list after reopen = %+v, want keep and undo", list)
	}
}
