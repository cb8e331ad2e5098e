package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// titleWords and titleRunes bound an automatic title: a few words of the first message.
const (
	titleWords = 6
	titleRunes = 40
	// maxTitleRunes bounds a title the user types.
	maxTitleRunes = 120
)

// titleFrom makes a conversation title of the first few words of its first message: at most
// titleWords words and titleRunes characters, cut at a word with "…" when the message goes on.
func titleFrom(text string) string {
	words := strings.Fields(text)
	cut := len(words) > titleWords
	if cut {
		words = words[:titleWords]
	}
	title := strings.Join(words, " ")
	if utf8.RuneCountInString(title) > titleRunes {
		r := []rune(title)[:titleRunes]
		title = string(r)
		if i := strings.LastIndexByte(title, ' '); i > titleRunes/2 {
			title = title[:i]
		}
		cut = true
	}
	if cut {
		title = strings.TrimRightFunc(title, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) }) + "…"
	}
	return title
}

// distinctTitle returns title, or title with the first free " (n)" appended when a listed
// conversation already has it, so five chats that open with the same words stay apart.
func distinctTitle(title string, listed []Conversation) string {
	taken := make(map[string]bool, len(listed))
	for _, c := range listed {
		taken[c.Title] = true
	}
	if !taken[title] {
		return title
	}
	for n := 2; ; n++ {
		if t := fmt.Sprintf("%s (%d)", title, n); !taken[t] {
			return t
		}
	}
}

// RenameConversation gives a conversation the title the user typed (spaces collapsed).
func (s *ChatService) RenameConversation(id int64, title string) (Conversation, error) {
	title = strings.Join(strings.Fields(title), " ")
	if title == "" {
		return Conversation{}, errors.New("rename conversation: the title is empty; type a title, or press Escape to keep the old one")
	}
	if n := utf8.RuneCountInString(title); n > maxTitleRunes {
		return Conversation{}, fmt.Errorf("rename conversation: the title has %d characters but at most %d fit; shorten it", n, maxTitleRunes)
	}
	if err := s.store.RenameConversation(s.ctx, id, title); err != nil {
		return Conversation{}, fmt.Errorf("rename conversation %d: %w", id, err)
	}
	c, err := s.store.Conversation(s.ctx, id)
	if err != nil {
		return Conversation{}, fmt.Errorf("read conversation %d: %w", id, err)
	}
	return c, nil
}

// SearchConversations lists the conversations whose title or messages hold every word of query,
// the last as a prefix, best match first, each with the text around its match (blank: every
// conversation, most recently updated first). A build without FTS5 matches the text as a
// substring, most recently updated first.
func (s *ChatService) SearchConversations(query string) ([]Conversation, error) {
	query = strings.TrimSpace(query)
	if query == "" {
		return s.ListConversations()
	}
	convs, err := s.store.SearchConversations(s.ctx, query)
	if err != nil {
		return nil, fmt.Errorf("search conversations for %q: %w", query, err)
	}
	if convs == nil {
		convs = []Conversation{}
	}
	return convs, nil
}

// TrashConversation deletes a conversation so that RestoreConversation can still undo it: it
// leaves the list and the search at once, stopping its generation if one runs, and its rows go
// with DeleteConversation or when the app next starts.
func (s *ChatService) TrashConversation(id int64) error {
	s.Stop(id)
	if err := s.store.TrashConversation(s.ctx, id); err != nil {
		return fmt.Errorf("delete conversation %d: %w", id, err)
	}
	return nil
}

// RestoreConversation undoes TrashConversation.
func (s *ChatService) RestoreConversation(id int64) (Conversation, error) {
	if err := s.store.RestoreConversation(s.ctx, id); err != nil {
		return Conversation{}, fmt.Errorf("undo the delete of conversation %d: %w", id, err)
	}
	c, err := s.store.Conversation(s.ctx, id)
	if err != nil {
		return Conversation{}, fmt.Errorf("read conversation %d: %w", id, err)
	}
	return c, nil
}

// ConversationExport is one conversation written out as a file the UI saves.
type ConversationExport struct {
	FileName string `json:"fileName"`
	MimeType string `json:"mimeType"`
	Content  string `json:"content"`
}

// exportedMessage is one message in a JSON export.
type exportedMessage struct {
	Role        string `json:"role"`
	Content     string `json:"content"`
	State       string `json:"state"`
	Model       string `json:"model,omitempty"`
	StopReason  string `json:"stopReason,omitempty"`
	CreatedAtMs int64  `json:"createdAtMs"`
}

// exportedConversation is the JSON export's document.
type exportedConversation struct {
	Title        string            `json:"title"`
	Model        string            `json:"model"`
	CreatedAtMs  int64             `json:"createdAtMs"`
	ExportedAtMs int64             `json:"exportedAtMs"`
	Messages     []exportedMessage `json:"messages"`
}

// ExportConversation writes a conversation as "markdown" (a heading per message) or "json"
// (title, model and every message with its role, text, state and stop reason).
func (s *ChatService) ExportConversation(id int64, format string) (ConversationExport, error) {
	c, err := s.store.Conversation(s.ctx, id)
	if err != nil {
		return ConversationExport{}, fmt.Errorf("export conversation %d: %w", id, err)
	}
	msgs, err := s.store.Messages(s.ctx, id)
	if err != nil {
		return ConversationExport{}, fmt.Errorf("export conversation %d: %w", id, err)
	}
	base := exportFileBase(c.Title)
	switch format {
	case "markdown":
		return ConversationExport{FileName: base + ".md", MimeType: "text/markdown", Content: exportMarkdown(c, msgs)}, nil
	case "json":
		doc := exportedConversation{Title: c.Title, Model: c.Model, CreatedAtMs: c.CreatedAtMs, ExportedAtMs: nowMs(), Messages: []exportedMessage{}}
		for _, m := range msgs {
			doc.Messages = append(doc.Messages, exportedMessage{Role: m.Role, Content: m.Content, State: m.State, Model: m.Model, StopReason: m.StopReason, CreatedAtMs: m.CreatedAtMs})
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return ConversationExport{}, fmt.Errorf("export conversation %d as JSON: %w", id, err)
		}
		return ConversationExport{FileName: base + ".json", MimeType: "application/json", Content: string(b) + "\n"}, nil
	default:
		return ConversationExport{}, fmt.Errorf("export conversation %d: unknown format %q; use \"markdown\" or \"json\"", id, format)
	}
}

// exportMarkdown renders a conversation as markdown: the title, a line of facts, then each
// message under a heading naming who wrote it. Message text is markdown already and goes in as is.
func exportMarkdown(c Conversation, msgs []Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", c.Title)
	fmt.Fprintf(&b, "_Model %s · started %s_\n", orDash(c.Model), time.UnixMilli(c.CreatedAtMs).UTC().Format("2006-01-02 15:04 UTC"))
	for _, m := range msgs {
		who := map[string]string{"user": "You", "assistant": "Assistant", "system": "System"}[m.Role]
		if who == "" {
			who = m.Role
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", who, strings.TrimRight(m.Content, "\n"))
		if m.State == StateInterrupted {
			b.WriteString("\n_(interrupted)_\n")
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// exportFileBase makes a file name of a title: letters and digits kept, runs of anything else
// one "-", at most 60 characters; "conversation" when nothing is left.
func exportFileBase(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			if utf8.RuneCountInString(b.String()) >= 60 {
				break
			}
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		return "conversation"
	}
	return b.String()
}
