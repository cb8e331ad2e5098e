package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Message states.
const (
	StateComplete    = "complete"
	StateStreaming   = "streaming"
	StateInterrupted = "interrupted"
	StateError       = "error"
)

// Conversation is one chat thread.
type Conversation struct {
	ID          int64  `json:"id"`
	Title       string `json:"title"`
	Model       string `json:"model"`
	CreatedAtMs int64  `json:"created_at_ms"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
	// ContextPolicy is what the chat does once its history outgrows the context: "rolling"
	// (the default), "truncate-middle" or "stop"; the app checks the value.
	ContextPolicy string `json:"context_policy"`
	// Settings are the conversation's generation settings as JSON ("" = the app's defaults);
	// the app reads and checks them.
	Settings string `json:"settings"`
	// Snippet is the text around a search hit's match (SearchConversations only; "" when the
	// match is the title, or the build searches without FTS5).
	Snippet string `json:"snippet,omitempty"`
}

// Message is one turn of a conversation. An assistant reply is saved as "streaming" when it
// starts, updated as text arrives, and ends "complete", "interrupted" (the engine died or the
// user stopped it; Content keeps the partial text) or "error".
type Message struct {
	ID             int64   `json:"id"`
	ConversationID int64   `json:"conversation_id"`
	Role           string  `json:"role"`
	Content        string  `json:"content"`
	State          string  `json:"state"`
	Model          string  `json:"model"`
	TokensPerSec   float64 `json:"tokens_per_sec"`
	TTFTMs         int64   `json:"ttft_ms"`
	Settings       string  `json:"settings"` // JSON of the sampling settings used
	CreatedAtMs    int64   `json:"created_at_ms"`
	// StopReason says why a reply ended ("eos", "length", "stop", "cancelled"; "" = unknown or
	// a user message).
	StopReason string `json:"stop_reason"`
	// AltIndex is which version of a regenerated reply the row holds (0-based), AltCount how
	// many versions it has (0 = never regenerated: no alternatives). Messages fills both;
	// UpdateMessage keeps the held version's alternative row equal to the message.
	AltIndex int `json:"alt_index"`
	AltCount int `json:"alt_count"`
}

func checkMessage(m Message) error {
	switch m.Role {
	case "system", "user", "assistant":
	default:
		return fmt.Errorf("role %q is not system, user or assistant", m.Role)
	}
	switch m.State {
	case StateComplete, StateStreaming, StateInterrupted, StateError:
	default:
		return fmt.Errorf("state %q is not complete, streaming, interrupted or error", m.State)
	}
	return nil
}

// CreateConversation starts a conversation.
func (s *Store) CreateConversation(ctx context.Context, title, model string) (Conversation, error) {
	c := Conversation{Title: title, Model: model, CreatedAtMs: nowMs(), ContextPolicy: DefaultContextPolicy}
	c.UpdatedAtMs = c.CreatedAtMs
	err := s.tx(ctx, "create conversation", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "INSERT INTO conversations(title, model, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?) RETURNING id",
			c.Title, c.Model, c.CreatedAtMs, c.UpdatedAtMs).Scan(&c.ID)
	})
	return c, err
}

// DefaultContextPolicy is the context policy of a new conversation (the column's default).
const DefaultContextPolicy = "rolling"

// SetContextPolicy changes a conversation's context-overflow policy.
func (s *Store) SetContextPolicy(ctx context.Context, id int64, policy string) error {
	return s.tx(ctx, fmt.Sprintf("set the context policy of conversation %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE conversations SET context_policy = ? WHERE id = ?", policy, id)
		return mustTouch(res, err, "conversation", id)
	})
}

// SetConversationSettings stores a conversation's generation settings (JSON; "" = the app's
// defaults).
func (s *Store) SetConversationSettings(ctx context.Context, id int64, settings string) error {
	return s.tx(ctx, fmt.Sprintf("set the generation settings of conversation %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE conversations SET settings = ? WHERE id = ?", settings, id)
		return mustTouch(res, err, "conversation", id)
	})
}

// Conversation returns one conversation.
func (s *Store) Conversation(ctx context.Context, id int64) (Conversation, error) {
	var c Conversation
	err := s.db.QueryRowContext(ctx, "SELECT id, title, model, created_at_ms, updated_at_ms, context_policy, settings FROM conversations WHERE id = ?", id).
		Scan(&c.ID, &c.Title, &c.Model, &c.CreatedAtMs, &c.UpdatedAtMs, &c.ContextPolicy, &c.Settings)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("conversation %d not found", id)
	}
	if err != nil {
		return c, s.fail(fmt.Sprintf("read conversation %d", id), err)
	}
	return c, nil
}

// RenameConversation changes a conversation's title.
func (s *Store) RenameConversation(ctx context.Context, id int64, title string) error {
	return s.tx(ctx, fmt.Sprintf("rename conversation %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE conversations SET title = ?, updated_at_ms = ? WHERE id = ?", title, nowMs(), id)
		return mustTouch(res, err, "conversation", id)
	})
}

// ListConversations lists conversations, most recently updated first.
func (s *Store) ListConversations(ctx context.Context) ([]Conversation, error) {
	return s.queryConversations(ctx, "list conversations", "SELECT id, title, model, created_at_ms, updated_at_ms, context_policy, settings FROM conversations WHERE deleted_at_ms = 0 ORDER BY updated_at_ms DESC, id DESC")
}

func (s *Store) queryConversations(ctx context.Context, what, query string, args ...any) ([]Conversation, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.fail(what, err)
	}
	defer rows.Close()
	out := []Conversation{}
	for rows.Next() {
		var c Conversation
		if err := rows.Scan(&c.ID, &c.Title, &c.Model, &c.CreatedAtMs, &c.UpdatedAtMs, &c.ContextPolicy, &c.Settings); err != nil {
			return nil, s.fail(what, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(what, err)
	}
	return out, nil
}

// TrashConversation hides a conversation from the list and from search until RestoreConversation
// brings it back, DeleteConversation removes it, or the next Open purges it.
func (s *Store) TrashConversation(ctx context.Context, id int64) error {
	return s.tx(ctx, fmt.Sprintf("move conversation %d to the trash", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE conversations SET deleted_at_ms = ? WHERE id = ?", nowMs(), id)
		return mustTouch(res, err, "conversation", id)
	})
}

// RestoreConversation takes a conversation back out of the trash.
func (s *Store) RestoreConversation(ctx context.Context, id int64) error {
	return s.tx(ctx, fmt.Sprintf("restore conversation %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE conversations SET deleted_at_ms = 0 WHERE id = ? AND deleted_at_ms > 0", id)
		if err := mustTouch(res, err, "conversation in the trash", id); err != nil {
			return fmt.Errorf("%w (it was already removed for good, or never deleted)", err)
		}
		return nil
	})
}

// PurgeTrash removes every conversation in the trash, with its messages, and returns how many.
func (s *Store) PurgeTrash(ctx context.Context) (int64, error) {
	var n int64
	err := s.tx(ctx, "empty the conversation trash", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM conversations WHERE deleted_at_ms > 0")
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// AddMessage appends a message to its conversation and returns it with ID and CreatedAtMs set.
func (s *Store) AddMessage(ctx context.Context, m Message) (Message, error) {
	if err := checkMessage(m); err != nil {
		return Message{}, fmt.Errorf("add message to conversation %d: %w", m.ConversationID, err)
	}
	if m.CreatedAtMs == 0 {
		m.CreatedAtMs = nowMs()
	}
	err := s.tx(ctx, fmt.Sprintf("add message to conversation %d", m.ConversationID), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE conversations SET updated_at_ms = ? WHERE id = ?", m.CreatedAtMs, m.ConversationID)
		if err := mustTouch(res, err, "conversation", m.ConversationID); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `INSERT INTO messages(conversation_id, role, content, state, model, tokens_per_sec, ttft_ms, settings, created_at_ms, stop_reason)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			m.ConversationID, m.Role, m.Content, m.State, m.Model, m.TokensPerSec, m.TTFTMs, m.Settings, m.CreatedAtMs, m.StopReason).Scan(&m.ID)
	})
	if err != nil {
		return Message{}, err
	}
	return m, nil
}

// UpdateMessage rewrites a message's content, state, model, speed, TTFT, settings and stop reason (a streaming
// reply as it grows and when it ends).
func (s *Store) UpdateMessage(ctx context.Context, m Message) error {
	if err := checkMessage(m); err != nil {
		return fmt.Errorf("update message %d: %w", m.ID, err)
	}
	return s.tx(ctx, fmt.Sprintf("update message %d", m.ID), func(tx *sql.Tx) error {
		var conv int64
		err := tx.QueryRowContext(ctx, `UPDATE messages SET role = ?, content = ?, state = ?, model = ?, tokens_per_sec = ?, ttft_ms = ?, settings = ?, stop_reason = ?
			WHERE id = ? RETURNING conversation_id`, m.Role, m.Content, m.State, m.Model, m.TokensPerSec, m.TTFTMs, m.Settings, m.StopReason, m.ID).Scan(&conv)
		if err == sql.ErrNoRows {
			return fmt.Errorf("no message with id %d", m.ID)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE message_alternatives SET content = ?, state = ?, model = ?, tokens_per_sec = ?, ttft_ms = ?, settings = ?, stop_reason = ?
			WHERE message_id = ?1 AND n = (SELECT alt_index FROM messages WHERE id = ?1)`,
			m.Content, m.State, m.Model, m.TokensPerSec, m.TTFTMs, m.Settings, m.StopReason, m.ID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE conversations SET updated_at_ms = ? WHERE id = ?", nowMs(), conv)
		return err
	})
}

// Messages returns a conversation's messages in order.
func (s *Store) Messages(ctx context.Context, convID int64) ([]Message, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, conversation_id, role, content, state, model, tokens_per_sec, ttft_ms, settings, created_at_ms, stop_reason,
			alt_index, (SELECT count(*) FROM message_alternatives a WHERE a.message_id = m.id)
		FROM messages m WHERE conversation_id = ? ORDER BY id`, convID)
	if err != nil {
		return nil, s.fail(fmt.Sprintf("list messages of conversation %d", convID), err)
	}
	defer rows.Close()
	out := []Message{}
	for rows.Next() {
		var m Message
		if err := rows.Scan(&m.ID, &m.ConversationID, &m.Role, &m.Content, &m.State, &m.Model, &m.TokensPerSec, &m.TTFTMs, &m.Settings, &m.CreatedAtMs, &m.StopReason, &m.AltIndex, &m.AltCount); err != nil {
			return nil, s.fail(fmt.Sprintf("list messages of conversation %d", convID), err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(fmt.Sprintf("list messages of conversation %d", convID), err)
	}
	return out, nil
}

// DeleteMessages removes messages of a conversation: the one with id fromID and, when andLater,
// every message after it too (a regenerate or an edit drops the turns that followed). It returns
// how many it removed; a fromID not in the conversation is an error.
func (s *Store) DeleteMessages(ctx context.Context, convID, fromID int64, andLater bool) (int64, error) {
	var n int64
	err := s.tx(ctx, fmt.Sprintf("delete message %d of conversation %d", fromID, convID), func(tx *sql.Tx) error {
		q := "DELETE FROM messages WHERE conversation_id = ? AND id = ?"
		if andLater {
			q = "DELETE FROM messages WHERE conversation_id = ? AND id >= ?"
		}
		var found int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM messages WHERE conversation_id = ? AND id = ?", convID, fromID).Scan(&found); err != nil {
			return err
		}
		if found == 0 {
			return fmt.Errorf("no message with id %d in conversation %d", fromID, convID)
		}
		res, err := tx.ExecContext(ctx, q, convID, fromID)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE conversations SET updated_at_ms = ? WHERE id = ?", nowMs(), convID)
		return err
	})
	return n, err
}

// DeleteConversation removes a conversation and its messages.
func (s *Store) DeleteConversation(ctx context.Context, id int64) error {
	return s.tx(ctx, fmt.Sprintf("delete conversation %d", id), func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM conversations WHERE id = ?", id)
		return mustTouch(res, err, "conversation", id)
	})
}

// InterruptStreaming marks every message still "streaming" as "interrupted" and returns how many
// it changed. The app calls it at start: a reply that was streaming when the app or the engine
// died keeps its partial text and shows as interrupted.
func (s *Store) InterruptStreaming(ctx context.Context) (int64, error) {
	var n int64
	err := s.tx(ctx, "mark streaming messages interrupted", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE messages SET state = ? WHERE state = ?", StateInterrupted, StateStreaming)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE message_alternatives SET state = ? WHERE state = ?", StateInterrupted, StateStreaming); err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

func mustTouch(res sql.Result, err error, what string, id int64) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("no %s with id %d", what, id)
	}
	return nil
}

// NewAlternative starts another version of an assistant reply: the version the message holds is
// kept as an alternative (saved as version 0 the first time), and the message becomes a new,
// empty version in state streaming, the last one, which a regenerate then streams into. It
// returns the message as it now is.
func (s *Store) NewAlternative(ctx context.Context, messageID int64) (Message, error) {
	var m Message
	err := s.tx(ctx, fmt.Sprintf("add an alternative to message %d", messageID), func(tx *sql.Tx) error {
		var err error
		if m, err = messageTx(ctx, tx, messageID); err != nil {
			return err
		}
		if m.Role != "assistant" {
			return fmt.Errorf("message %d is a %s message; only a reply has alternatives", messageID, m.Role)
		}
		if err := saveAlternativeTx(ctx, tx, m); err != nil {
			return err
		}
		var next int
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(n), -1) + 1 FROM message_alternatives WHERE message_id = ?", messageID).Scan(&next); err != nil {
			return err
		}
		m.Content, m.State, m.StopReason, m.TokensPerSec, m.TTFTMs, m.AltIndex = "", StateStreaming, "", 0, 0, next
		m.CreatedAtMs = nowMs()
		if _, err := tx.ExecContext(ctx, "UPDATE messages SET content = '', state = ?, stop_reason = '', tokens_per_sec = 0, ttft_ms = 0, alt_index = ? WHERE id = ?", m.State, next, messageID); err != nil {
			return err
		}
		if err := saveAlternativeTx(ctx, tx, m); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT count(*) FROM message_alternatives WHERE message_id = ?", messageID).Scan(&m.AltCount)
	})
	if err != nil {
		return Message{}, err
	}
	return m, nil
}

// SelectAlternative makes version n of a reply the one its message holds (the one later turns
// see) and returns the message. The version it held is saved first, so nothing is lost.
func (s *Store) SelectAlternative(ctx context.Context, messageID int64, n int) (Message, error) {
	var m Message
	err := s.tx(ctx, fmt.Sprintf("show version %d of message %d", n+1, messageID), func(tx *sql.Tx) error {
		var err error
		if m, err = messageTx(ctx, tx, messageID); err != nil {
			return err
		}
		if m.AltCount == 0 {
			return fmt.Errorf("message %d has no alternatives; regenerate it to make one", messageID)
		}
		if n < 0 || n >= m.AltCount {
			return fmt.Errorf("message %d has %d versions; version %d is not one of them", messageID, m.AltCount, n+1)
		}
		if m.State == StateStreaming {
			return fmt.Errorf("message %d is still being generated; stop it or wait for the reply", messageID)
		}
		if err := saveAlternativeTx(ctx, tx, m); err != nil {
			return err
		}
		err = tx.QueryRowContext(ctx, `SELECT content, state, model, tokens_per_sec, ttft_ms, settings, stop_reason FROM message_alternatives WHERE message_id = ? AND n = ?`, messageID, n).
			Scan(&m.Content, &m.State, &m.Model, &m.TokensPerSec, &m.TTFTMs, &m.Settings, &m.StopReason)
		if err != nil {
			return err
		}
		m.AltIndex = n
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET content = ?, state = ?, model = ?, tokens_per_sec = ?, ttft_ms = ?, settings = ?, stop_reason = ?, alt_index = ? WHERE id = ?`,
			m.Content, m.State, m.Model, m.TokensPerSec, m.TTFTMs, m.Settings, m.StopReason, n, messageID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "UPDATE conversations SET updated_at_ms = ? WHERE id = ?", nowMs(), m.ConversationID)
		return err
	})
	if err != nil {
		return Message{}, err
	}
	return m, nil
}

// messageTx reads one message with its alternative figures.
func messageTx(ctx context.Context, tx *sql.Tx, id int64) (Message, error) {
	var m Message
	err := tx.QueryRowContext(ctx, `SELECT id, conversation_id, role, content, state, model, tokens_per_sec, ttft_ms, settings, created_at_ms, stop_reason,
			alt_index, (SELECT count(*) FROM message_alternatives a WHERE a.message_id = m.id)
		FROM messages m WHERE id = ?`, id).
		Scan(&m.ID, &m.ConversationID, &m.Role, &m.Content, &m.State, &m.Model, &m.TokensPerSec, &m.TTFTMs, &m.Settings, &m.CreatedAtMs, &m.StopReason, &m.AltIndex, &m.AltCount)
	if errors.Is(err, sql.ErrNoRows) {
		return Message{}, fmt.Errorf("no message with id %d", id)
	}
	return m, err
}

// saveAlternativeTx writes the version m holds into its alternative row.
func saveAlternativeTx(ctx context.Context, tx *sql.Tx, m Message) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO message_alternatives(message_id, n, content, state, model, tokens_per_sec, ttft_ms, settings, stop_reason, created_at_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT(message_id, n) DO UPDATE SET content = excluded.content, state = excluded.state, model = excluded.model,
			tokens_per_sec = excluded.tokens_per_sec, ttft_ms = excluded.ttft_ms, settings = excluded.settings, stop_reason = excluded.stop_reason`,
		m.ID, m.AltIndex, m.Content, m.State, m.Model, m.TokensPerSec, m.TTFTMs, m.Settings, m.StopReason, m.CreatedAtMs)
	return err
}
