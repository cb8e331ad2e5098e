package store

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// openWithoutFTS5 opens dir as a binary whose SQLite lacks FTS5 would (the check says no).
func openWithoutFTS5(t *testing.T, dir string) *Store {
	t.Helper()
	linked := fts5Linked
	fts5Linked = func(context.Context, *sql.DB) (bool, error) { return false, nil }
	defer func() { fts5Linked = linked }()
	return openTemp(t, dir)
}

// openWithFTS5 opens dir with the search index, skipping the test in a build without FTS5.
func openWithFTS5(t *testing.T, dir string) *Store {
	t.Helper()
	s := openTemp(t, dir)
	if !s.fts {
		t.Skip("this build's SQLite has no FTS5: go test -tags sqlite_fts5 ./store/")
	}
	return s
}

func searchIDs(t *testing.T, s *Store, query string) []int64 {
	t.Helper()
	got, err := s.SearchConversations(context.Background(), query)
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	ids := []int64{}
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	return ids
}

func addConversation(t *testing.T, s *Store, title string, texts ...string) (int64, []int64) {
	t.Helper()
	ctx := context.Background()
	c, err := s.CreateConversation(ctx, title, "m")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []int64
	for i, text := range texts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		m, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: role, Content: text, State: StateComplete})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m.ID)
	}
	return c.ID, msgs
}

func TestSearchFindsWordsInTitlesAndMessagesByPrefixBestMatchFirst(t *testing.T) {
	ctx := context.Background()
	s := openWithFTS5(t, t.TempDir())
	dragon, _ := addConversation(t, s, "Stories", "tell me about a Dragon named Ember", "Once there was a dragon.")
	recipe, _ := addConversation(t, s, "Dragon fruit recipes", "how ripe?")
	percent, _ := addConversation(t, s, "Maths", "what is 50% of 8?")
	trip, _ := addConversation(t, s, "Trip", "a café in Zürich, near the lake")
	mangoMany, _ := addConversation(t, s, "Fruit", "mango", "mango mango, a mango")
	mangoOnce, _ := addConversation(t, s, "Shopping", "bread, milk, eggs, butter, cheese, apples, pears and one mango for the long weekend trip")
	trashed, _ := addConversation(t, s, "Old", "another dragon named Ember")
	if err := s.TrashConversation(ctx, trashed); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		query string
		want  []int64
	}{
		{"dragon", []int64{recipe, dragon}},      // the title outweighs a message; the trash is left out
		{"EMBER", []int64{dragon}},               // a word only in a message, any case
		{"emb", []int64{dragon}},                 // the last word as a prefix while the user types
		{"drag", []int64{recipe, dragon}},        // a prefix in titles and messages
		{"embe ", []int64{}},                     // a finished word (a space after it) is no prefix
		{"dragon emb", []int64{dragon}},          // every word must match, the last one as a prefix
		{"fruit dragon", []int64{recipe}},        // in any order
		{"cafe zurich", []int64{trip}},           // diacritics ignored
		{"mango", []int64{mangoMany, mangoOnce}}, // more mentions in less text rank first (bm25)
		{"50%", []int64{percent}},                // punctuation separates words
		{"nothing like this", []int64{}},         // not found
		{"xylophone", []int64{}},                 // not found
		{`"`, []int64{}},                         // FTS5 syntax is plain text, never an error
		{`dragon" OR "ember`, []int64{}},         // quotes inside a word stay text
		{"NOT (AND) * ^", []int64{}},             // operators too
		{"- ?", []int64{}},                       // nothing but punctuation matches nothing
	}
	for _, c := range cases {
		if got := searchIDs(t, s, c.query); !reflect.DeepEqual(got, c.want) {
			t.Errorf("search %q = %v, want %v", c.query, got, c.want)
		}
	}
	hits, err := s.SearchConversations(ctx, "ember")
	if err != nil || len(hits) != 1 || !strings.Contains(hits[0].Snippet, "Dragon named Ember") {
		t.Errorf("search ember = %+v, %v; want one hit whose snippet shows the matching message", hits, err)
	}
	hits, err = s.SearchConversations(ctx, "recipes")
	if err != nil || len(hits) != 1 || hits[0].Snippet != "" {
		t.Errorf("search recipes = %+v, %v; want one hit and no snippet (the title matched)", hits, err)
	}
}

func TestSearchIndexFollowsRenamesEditsDeletesAndUndo(t *testing.T) {
	ctx := context.Background()
	s := openWithFTS5(t, t.TempDir())
	c, msgs := addConversation(t, s, "Stories", "tell me about a dragon", "The dragon slept.")
	other, _ := addConversation(t, s, "Other", "nothing here")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	reply := Message{ID: msgs[1], ConversationID: c, Role: "assistant", State: StateComplete}
	steps := []struct {
		name  string
		do    func()
		query string
		want  []int64
	}{
		{"before", func() {}, "stories", []int64{c}},
		{"rename", func() { must(s.RenameConversation(ctx, c, "Wyvern tales")) }, "wyvern", []int64{c}},
		{"the old title is gone", func() {}, "stories", []int64{}},
		{"a streamed reply as it grows", func() { reply.Content = "The griffin"; reply.State = StateStreaming; must(s.UpdateMessage(ctx, reply)) }, "griffin", []int64{c}},
		{"an edit drops the old text", func() {}, "slept", []int64{}},
		{"a new message", func() {
			_, err := s.AddMessage(ctx, Message{ConversationID: other, Role: "user", Content: "a unicorn", State: StateComplete})
			must(err)
		}, "unicorn", []int64{other}},
		{"a regenerate replaces the reply", func() {
			_, err := s.NewAlternative(ctx, msgs[1])
			must(err)
			reply.Content, reply.State, reply.AltIndex = "The phoenix", StateComplete, 1
			must(s.UpdateMessage(ctx, reply))
		}, "griffin", []int64{}},
		{"the new version is found", func() {}, "phoenix", []int64{c}},
		{"choosing the old version brings it back", func() {
			_, err := s.SelectAlternative(ctx, msgs[1], 0)
			must(err)
		}, "griffin", []int64{c}},
		{"the other version is not", func() {}, "phoenix", []int64{}},
		{"a deleted message", func() { _, err := s.DeleteMessages(ctx, c, msgs[1], true); must(err) }, "griffin", []int64{}},
		{"the message before it stays", func() {}, "dragon", []int64{c}},
		{"the trash", func() { must(s.TrashConversation(ctx, c)) }, "dragon", []int64{}},
		{"undo of the delete", func() { must(s.RestoreConversation(ctx, c)) }, "dragon", []int64{c}},
		{"removed for good", func() { must(s.DeleteConversation(ctx, c)) }, "dragon", []int64{}},
	}
	for _, st := range steps {
		st.do()
		if got := searchIDs(t, s, st.query); !reflect.DeepEqual(got, st.want) {
			t.Fatalf("after %s: search %q = %v, want %v", st.name, st.query, got, st.want)
		}
	}
	var rows int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM conversation_search").Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("the index holds %d rows (%v), want 1: the removed conversation's row must go", rows, err)
	}
}

func TestWithoutFTS5OpenMakesNoIndexAndADatabaseItWroteIsIndexedByABuildWithIt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openWithoutFTS5(t, dir)
	if s.fts {
		t.Fatal("the store uses the index although the check says the SQLite has no FTS5")
	}
	c, _ := addConversation(t, s, "Stories", "a dragon named Ember")
	if got := searchIDs(t, s, "Ember"); !reflect.DeepEqual(got, []int64{c}) {
		t.Fatalf("LIKE search ember = %v, want [%d]", got, c)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = 'conversation_search'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d conversation_search tables (%v) in a build without FTS5, want none", n, err)
	}
	s.Close()

	s = openWithFTS5(t, dir)
	if got := searchIDs(t, s, "emb"); !reflect.DeepEqual(got, []int64{c}) {
		t.Fatalf("after reopening with FTS5: search emb = %v, want [%d] (the index backfills)", got, c)
	}
}

func TestMigrationToSearchIndexesEarlierConversations(t *testing.T) {
	dir := t.TempDir()
	writeSchemaV1(t, dir)
	seed, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: filepath.Join(dir, FileName)}).EscapedPath()+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO conversations(id, title, model, created_at_ms, updated_at_ms) VALUES (3, 'Old chat', 'm', 1, 1)`,
		`INSERT INTO messages(conversation_id, role, content, state, created_at_ms) VALUES (3, 'user', 'a xylophone solo', 'complete', 1)`,
	} {
		if _, err := seed.Exec(q); err != nil {
			t.Fatalf("schema 1 setup: %v", err)
		}
	}
	seed.Close()
	for _, open := range []struct {
		name string
		fn   func(*testing.T, string) *Store
	}{{"without FTS5", openWithoutFTS5}, {"with FTS5", openTemp}} {
		s := open.fn(t, dir)
		if got := searchIDs(t, s, "xylophone"); !reflect.DeepEqual(got, []int64{3}) {
			t.Fatalf("%s: search xylophone = %v, want the conversation from before the migration", open.name, got)
		}
		if msgs, err := s.Messages(context.Background(), 3); err != nil || len(msgs) != 1 {
			t.Fatalf("%s: messages from before = %+v, %v", open.name, msgs, err)
		}
		s.Close()
	}
}

func TestMatchQueryQuotesEveryWordAndMakesTheLastAPrefix(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"dragon", `"dragon"*`},
		{"dragon ember", `"dragon" "ember"*`},
		{"dragon ember ", `"dragon" "ember"`},
		{`say "hi"`, `"say" """hi"""*`},
		{"foo-bar", `"foo-bar"*`},
		{"dragon ?", `"dragon"`},
		{"  ", ""},
		{"- ?", ""},
	} {
		if got := matchQuery(c.text); got != c.want {
			t.Errorf("matchQuery(%q) = %s, want %s", c.text, got, c.want)
		}
	}
}
