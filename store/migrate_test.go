package store

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"testing"
)

// writeSchemaV1 makes a database as a vkllm of schema version 1 left it, with one bench run.
func writeSchemaV1(t *testing.T, dir string) {
	t.Helper()
	dsn := "file:" + (&url.URL{Path: filepath.Join(dir, FileName)}).EscapedPath() + "?_journal_mode=WAL"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at_ms INTEGER NOT NULL)`,
		migrations[0],
		`INSERT INTO schema_version(version, applied_at_ms) VALUES (1, 0)`,
		`INSERT INTO bench_runs(id, created_at_ms, source, status, gpu_name, model_file, test, n_prompt, reps, warmup, avg_ns, avg_ts, ttft_ns)
		 VALUES (7, 1700000000000, 'vkllm', 'ok', 'NVIDIA H200', 'old.gguf', 'pp512', 512, 5, 1, 100000000, 5120.5, 100000000)`,
		`INSERT INTO bench_samples(run_id, rep, ns, tokens_per_sec) VALUES (7, 1, 100000000, 5120.5)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("schema 1 setup: %v", err)
		}
	}
}

func TestMigrationToDepthAndLoadKeepsEarlierBenchRuns(t *testing.T) {
	dir := t.TempDir()
	writeSchemaV1(t, dir)
	s := openTemp(t, dir)
	ctx := context.Background()
	if v, err := s.Version(ctx); err != nil || v != SchemaVersion() || v < 2 {
		t.Fatalf("version after open: %d, %v; want %d (>= 2)", v, err, SchemaVersion())
	}
	runs, err := s.ListBenchRuns(ctx, BenchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs after the migration, want the 1 from before", len(runs))
	}
	old := runs[0]
	if old.ID != 7 || old.Test != "pp512" || old.GPUName != "NVIDIA H200" || old.ModelFile != "old.gguf" || old.AvgTS != 5120.5 ||
		old.TTFTNs != 1e8 || len(old.Samples) != 1 || old.Samples[0].Ns != 1e8 {
		t.Errorf("the earlier run changed: %+v", old)
	}
	if old.NDepth != 0 || old.LoadNs != 0 || old.Decode != "" {
		t.Errorf("the earlier run reads depth %d, load %d ns, decode %q; want 0, 0 and \"\" (not measured then)", old.NDepth, old.LoadNs, old.Decode)
	}

	deep := fullBenchRun("tg128 @ d4096", BenchOK)
	deep.NPrompt, deep.NGen, deep.NDepth, deep.LoadNs = 0, 128, 4096, 987654321
	if _, err := s.SaveBenchRun(ctx, deep); err != nil {
		t.Fatal(err)
	}
	runs, err = s.ListBenchRuns(ctx, BenchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Test != "tg128 @ d4096" || runs[0].NDepth != 4096 || runs[0].LoadNs != 987654321 {
		t.Errorf("a run at depth after the migration: %+v", runs[0])
	}
}

func TestMigrationToContextPolicyKeepsConversationsOnTheRollingDefault(t *testing.T) {
	dir := t.TempDir()
	writeSchemaV1(t, dir)
	dsn := "file:" + (&url.URL{Path: filepath.Join(dir, FileName)}).EscapedPath() + "?_journal_mode=WAL"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO conversations(id, title, model, created_at_ms, updated_at_ms) VALUES (3, 'old chat', 'm', 1, 2)`,
		`INSERT INTO messages(conversation_id, role, content, state, created_at_ms) VALUES (3, 'user', 'hello', 'complete', 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("schema 1 setup: %v", err)
		}
	}
	db.Close()
	s := openTemp(t, dir)
	ctx := context.Background()
	c, err := s.Conversation(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if c.Title != "old chat" || c.ContextPolicy != DefaultContextPolicy {
		t.Fatalf("the earlier conversation after the migration: %+v, want its title and policy %q", c, DefaultContextPolicy)
	}
	if msgs, err := s.Messages(ctx, 3); err != nil || len(msgs) != 1 || msgs[0].Content != "hello" {
		t.Fatalf("the earlier conversation's messages: %+v, %v", msgs, err)
	}
	if err := s.SetContextPolicy(ctx, 3, "stop"); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListConversations(ctx)
	if err != nil || len(list) != 1 || list[0].ContextPolicy != "stop" {
		t.Fatalf("list after setting the policy: %+v, %v; want policy stop", list, err)
	}
	if err := s.SetContextPolicy(ctx, 99, "stop"); err == nil {
		t.Fatal("setting the policy of a missing conversation succeeded")
	}
}

func TestMigrationToSettingsKeepsConversationsOnTheDefaultsAndRepliesWithoutAStopReason(t *testing.T) {
	dir := t.TempDir()
	writeSchemaV1(t, dir)
	dsn := "file:" + (&url.URL{Path: filepath.Join(dir, FileName)}).EscapedPath() + "?_journal_mode=WAL"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO conversations(id, title, model, created_at_ms, updated_at_ms) VALUES (4, 'old chat', 'm', 1, 2)`,
		`INSERT INTO messages(conversation_id, role, content, state, created_at_ms) VALUES (4, 'assistant', 'hi', 'complete', 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("schema 1 setup: %v", err)
		}
	}
	db.Close()
	s := openTemp(t, dir)
	ctx := context.Background()
	c, err := s.Conversation(ctx, 4)
	if err != nil || c.Settings != "" {
		t.Fatalf("the earlier conversation after the migration: %+v, %v; want no settings of its own", c, err)
	}
	msgs, err := s.Messages(ctx, 4)
	if err != nil || len(msgs) != 1 || msgs[0].StopReason != "" || msgs[0].Content != "hi" {
		t.Fatalf("the earlier reply after the migration: %+v, %v; want its text and no stop reason", msgs, err)
	}
	const settings = `{"maxTokens":8}`
	if err := s.SetConversationSettings(ctx, 4, settings); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListConversations(ctx)
	if err != nil || len(list) != 1 || list[0].Settings != settings {
		t.Fatalf("list after setting the settings: %+v, %v; want %s", list, err, settings)
	}
	if err := s.SetConversationSettings(ctx, 99, settings); err == nil {
		t.Fatal("setting the settings of a missing conversation succeeded")
	}
}
