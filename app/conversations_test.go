package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestTitleFromKeepsAFewWordsCutAtAWord(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Hello   there", "Hello there"},
		{"  Once upon a time  ", "Once upon a time"},
		{"Once upon a time there was a little girl named Lily", "Once upon a time there was…"},
		{"Write me, please, a poem about the sea", "Write me, please, a poem about…"},
		{"Supercalifragilisticexpialidocious antidisestablishmentarianism words", "Supercalifragilisticexpialidocious…"},
		{"", ""},
	}
	for _, c := range cases {
		if got := titleFrom(c.in); got != c.want {
			t.Errorf("titleFrom(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestConversationsOpeningAlikeGetDistinctTitles(t *testing.T) {
	svc := NewChatService(context.Background(), &fakeEngine{pieces: []string{"x"}}, newMemStore(), &recorder{})
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		c, err := svc.CreateConversation("Once upon a time")
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.Title] {
			t.Fatalf("conversation %d got the title %q a second time", i+1, c.Title)
		}
		seen[c.Title] = true
		if !strings.HasPrefix(c.Title, "Once upon a time") {
			t.Fatalf("title %q lost the message's words", c.Title)
		}
	}
	if !seen["Once upon a time"] || !seen["Once upon a time (5)"] {
		t.Fatalf("titles %v, want the plain title then (2)…(5)", seen)
	}
}

func TestRenameConversationCollapsesSpacesAndRefusesEmptyOrLong(t *testing.T) {
	svc := NewChatService(context.Background(), &fakeEngine{}, newMemStore(), &recorder{})
	c, _ := svc.CreateConversation("first")
	cases := []struct {
		title, want, wantErr string
	}{
		{"  My   trip  ", "My trip", ""},
		{"   ", "", "the title is empty"},
		{strings.Repeat("a", maxTitleRunes+1), "", "at most 120"},
	}
	for _, tc := range cases {
		got, err := svc.RenameConversation(c.ID, tc.title)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("rename %q: err %v, want one saying %q", tc.title, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got.Title != tc.want {
			t.Fatalf("rename %q = %q, %v; want %q", tc.title, got.Title, err, tc.want)
		}
	}
	if _, err := svc.RenameConversation(999, "x"); err == nil {
		t.Fatal("renaming a missing conversation succeeded")
	}
}

func TestTrashThenRestoreBringsTheConversationBackWithItsMessages(t *testing.T) {
	svc := NewChatService(context.Background(), &fakeEngine{pieces: []string{"hi"}}, newMemStore(), &recorder{})
	reply, err := svc.Send(0, "keep me")
	if err != nil {
		t.Fatal(err)
	}
	id := reply.ConversationID
	if err := svc.TrashConversation(id); err != nil {
		t.Fatal(err)
	}
	if list, _ := svc.ListConversations(); len(list) != 0 {
		t.Fatalf("a trashed conversation is still listed: %+v", list)
	}
	if hits, _ := svc.SearchConversations("keep"); len(hits) != 0 {
		t.Fatalf("a trashed conversation is still found: %+v", hits)
	}
	if _, err := svc.RestoreConversation(id); err != nil {
		t.Fatal(err)
	}
	msgs, _ := svc.Messages(id)
	if list, _ := svc.ListConversations(); len(list) != 1 || len(msgs) != 2 {
		t.Fatalf("after restore: list %+v, messages %+v; want the conversation with both messages", list, msgs)
	}
	if _, err := svc.RestoreConversation(id); err == nil {
		t.Fatal("restoring a conversation not in the trash succeeded")
	}
}

func TestSearchBlankListsAllAndAWordFindsItsConversation(t *testing.T) {
	svc := NewChatService(context.Background(), &fakeEngine{pieces: []string{"a reply about volcanoes"}}, newMemStore(), &recorder{})
	if _, err := svc.Send(0, "tell me something"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateConversation("other"); err != nil {
		t.Fatal(err)
	}
	if all, _ := svc.SearchConversations("  "); len(all) != 2 {
		t.Fatalf("blank search = %+v, want both conversations", all)
	}
	hits, err := svc.SearchConversations("Volcanoes")
	if err != nil || len(hits) != 1 || hits[0].Title != "tell me something" {
		t.Fatalf("search for a word of a reply = %+v, %v; want the conversation it is in", hits, err)
	}
}

func TestExportGivesTheConversationsMessagesAsMarkdownAndJSON(t *testing.T) {
	svc := NewChatService(context.Background(), &fakeEngine{pieces: []string{"Paris ", "is the capital."}}, newMemStore(), &recorder{})
	reply, err := svc.Send(0, "What is the capital of France?")
	if err != nil {
		t.Fatal(err)
	}
	md, err := svc.ExportConversation(reply.ConversationID, "markdown")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# What is the capital of France?", "## You\n\nWhat is the capital of France?", "## Assistant\n\nParis is the capital."} {
		if !strings.Contains(md.Content, want) {
			t.Errorf("markdown export lacks %q:\n%s", want, md.Content)
		}
	}
	if md.FileName != "what-is-the-capital-of-france.md" || md.MimeType != "text/markdown" {
		t.Errorf("markdown file %q (%s)", md.FileName, md.MimeType)
	}
	js, err := svc.ExportConversation(reply.ConversationID, "json")
	if err != nil {
		t.Fatal(err)
	}
	var doc exportedConversation
	if err := json.Unmarshal([]byte(js.Content), &doc); err != nil {
		t.Fatalf("JSON export does not parse: %v\n%s", err, js.Content)
	}
	if len(doc.Messages) != 2 || doc.Messages[0].Role != "user" || doc.Messages[1].Content != "Paris is the capital." || !strings.HasSuffix(js.FileName, ".json") {
		t.Fatalf("JSON export = %+v (%s)", doc, js.FileName)
	}
	if _, err := svc.ExportConversation(reply.ConversationID, "pdf"); err == nil || !strings.Contains(err.Error(), `"markdown" or "json"`) {
		t.Fatalf("export as pdf: %v; want an error naming the formats", err)
	}
}

func TestExportFileBaseKeepsLettersAndDigits(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Once upon a time (2)", "once-upon-a-time-2"},
		{"***", "conversation"},
		{"Ünïcode: ok", "ünïcode-ok"},
	}
	for _, c := range cases {
		if got := exportFileBase(c.in); got != c.want {
			t.Errorf("exportFileBase(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
