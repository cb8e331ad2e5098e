package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode"
)

// The conversation search reads an FTS5 index, conversation_search: one row per conversation
// (rowid = its id) holding its title and its messages' text, ranked by bm25 with the title
// weighing more. The index is a cache of the conversations and messages tables: migration 9's
// triggers queue every conversation whose title or messages change (a new one, a rename, a
// message added, streamed into, edited or deleted, the conversation removed for good), and a
// search first reindexes what is queued. The trash and its Undo change no text, so they only
// filter at query time.
//
// mattn/go-sqlite3 compiles FTS5 in only with the sqlite_fts5 build tag (make passes it). A
// binary built without it never touches the index (a query, even a trigger, naming a table of a
// missing module fails), searches with LIKE instead, and leaves the queue for the next binary
// with FTS5 to index.

// searchTitleWeight is how much a match in the title counts against one in a message (bm25's
// column weights).
const searchTitleWeight = 4.0

// fts5Linked reports whether the linked SQLite has FTS5. A variable so tests can act out a
// build without it.
var fts5Linked = func(ctx context.Context, db *sql.DB) (bool, error) {
	var on bool
	err := db.QueryRowContext(ctx, "SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&on)
	return on, err
}

// noFTS5Logged makes the fallback's reason show once a process, not once per Open.
var noFTS5Logged sync.Once

// openSearch creates the index where the linked SQLite has FTS5 and notes whether searches
// may use it. A new index starts with every conversation queued, so the first search fills it
// from the rows already there.
func (s *Store) openSearch(ctx context.Context) error {
	ok, err := fts5Linked(ctx, s.db)
	if err != nil {
		return s.fail("check the linked SQLite for FTS5", err)
	}
	if !ok {
		noFTS5Logged.Do(func() {
			slog.Info("conversation search scans the messages with LIKE: this build's SQLite has no FTS5",
				"remedy", "build with -tags sqlite_fts5, as make does")
		})
		return nil
	}
	err = s.tx(ctx, "create the conversation search index", func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = 'conversation_search'").Scan(&n); err != nil || n > 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, `CREATE VIRTUAL TABLE conversation_search USING fts5(title, body,
			tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3')`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO conversation_search_queue(conversation_id) SELECT id FROM conversations")
		return err
	})
	if err != nil {
		return err
	}
	s.fts = true
	return nil
}

// syncSearch reindexes the conversations the triggers queued since the last search.
func (s *Store) syncSearch(ctx context.Context) error {
	var queued bool
	if err := s.db.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM conversation_search_queue)").Scan(&queued); err != nil {
		return s.fail("read the conversation search queue", err)
	}
	if !queued {
		return nil
	}
	return s.tx(ctx, "update the conversation search index", func(tx *sql.Tx) error {
		for _, q := range []string{
			"DELETE FROM conversation_search WHERE rowid IN (SELECT conversation_id FROM conversation_search_queue)",
			`INSERT INTO conversation_search(rowid, title, body)
				SELECT c.id, c.title, COALESCE((SELECT group_concat(m.content, char(10) ORDER BY m.id) FROM messages m WHERE m.conversation_id = c.id), '')
				FROM conversations c WHERE c.id IN (SELECT conversation_id FROM conversation_search_queue)`,
			"DELETE FROM conversation_search_queue",
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}

// SearchConversations lists the conversations not in the trash whose title or messages hold
// every word of text, the last word as a prefix (the user may still be typing it), best match
// first (bm25, the title weighing more; then the most recently updated). Matching ignores case
// and diacritics; punctuation separates words. Each hit's Snippet is the text around its
// match when that is not the title. A build without FTS5 scans with LIKE instead (searchLike).
func (s *Store) SearchConversations(ctx context.Context, text string) ([]Conversation, error) {
	if !s.fts {
		return s.searchLike(ctx, text)
	}
	what := fmt.Sprintf("search conversations for %q", text)
	match := matchQuery(text)
	if match == "" {
		return []Conversation{}, nil
	}
	if err := s.syncSearch(ctx); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT c.id, c.title, c.model, c.created_at_ms, c.updated_at_ms, c.context_policy, c.settings,
			snippet(conversation_search, -1, '', '', '…', 12)
		FROM conversation_search JOIN conversations c ON c.id = conversation_search.rowid
		WHERE conversation_search MATCH ? AND c.deleted_at_ms = 0
		ORDER BY bm25(conversation_search, ?, 1.0), c.updated_at_ms DESC, c.id DESC`, match, searchTitleWeight)
	if err != nil {
		return nil, s.fail(what, err)
	}
	defer rows.Close()
	out := []Conversation{}
	for rows.Next() {
		var c Conversation
		if err := rows.Scan(&c.ID, &c.Title, &c.Model, &c.CreatedAtMs, &c.UpdatedAtMs, &c.ContextPolicy, &c.Settings, &c.Snippet); err != nil {
			return nil, s.fail(what, err)
		}
		if c.Snippet == c.Title {
			c.Snippet = ""
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(what, err)
	}
	return out, nil
}

// matchQuery turns what the user typed into an FTS5 query: each word a quoted string (so FTS5
// syntax in the text is plain text; a word with punctuation inside, "foo-bar", is a phrase),
// all of them required, the last one a prefix unless the text ends in a space. Words with no
// letter or digit (which the tokenizer drops) are left out; "" when none is left.
func matchQuery(text string) string {
	fields := strings.Fields(text)
	var terms []string
	for i, f := range fields {
		if strings.IndexFunc(f, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) < 0 {
			continue
		}
		term := `"` + strings.ReplaceAll(f, `"`, `""`) + `"`
		if i == len(fields)-1 && !strings.HasSuffix(text, " ") {
			term += "*"
		}
		terms = append(terms, term)
	}
	return strings.Join(terms, " ")
}

// searchLike is the search of a build without FTS5: the conversations not in the trash whose
// title or any message contains text, most recently updated first. The match ignores case for
// ASCII letters (SQLite's LIKE); % and _ in text match themselves. It scans the rows: fine for
// the thousands of messages a desktop chat history holds.
func (s *Store) searchLike(ctx context.Context, text string) ([]Conversation, error) {
	pattern := "%" + likeEscaper.Replace(text) + "%"
	return s.queryConversations(ctx, fmt.Sprintf("search conversations for %q", text),
		`SELECT id, title, model, created_at_ms, updated_at_ms, context_policy, settings FROM conversations c
		WHERE deleted_at_ms = 0 AND (title LIKE ?1 ESCAPE '\' OR EXISTS (
			SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ?1 ESCAPE '\'))
		ORDER BY updated_at_ms DESC, id DESC`, pattern)
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
