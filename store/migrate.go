package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are applied in order, each in its own transaction; schema_version records the last
// one applied. Never edit a released migration: append a new one.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE machines (
	id          INTEGER PRIMARY KEY,
	hostname    TEXT NOT NULL UNIQUE,
	os          TEXT NOT NULL DEFAULT '',
	kernel      TEXT NOT NULL DEFAULT '',
	cpu         TEXT NOT NULL DEFAULT '',
	ram_bytes   INTEGER NOT NULL DEFAULT 0,
	updated_at_ms INTEGER NOT NULL
);
CREATE TABLE gpus (
	key         TEXT PRIMARY KEY,            -- "vvvv:dddd:<uuid>"
	vendor_id   INTEGER NOT NULL DEFAULT 0,
	device_id   INTEGER NOT NULL DEFAULT 0,
	uuid        TEXT NOT NULL DEFAULT '',
	name        TEXT NOT NULL DEFAULT '',
	driver_name TEXT NOT NULL DEFAULT '',
	driver_info TEXT NOT NULL DEFAULT '',
	api_version TEXT NOT NULL DEFAULT '',
	updated_at_ms INTEGER NOT NULL
);
CREATE TABLE vram_pins (
	machine_id  INTEGER NOT NULL REFERENCES machines(id) ON DELETE CASCADE,
	gpu_key     TEXT NOT NULL,            -- no foreign key: a pin may be set before the GPU is recorded
	mb          INTEGER NOT NULL CHECK (mb > 0),
	updated_at_ms INTEGER NOT NULL,
	PRIMARY KEY (machine_id, gpu_key)
);
CREATE TABLE models (
	id          INTEGER PRIMARY KEY,
	path        TEXT NOT NULL UNIQUE,
	sha256      TEXT NOT NULL DEFAULT '',
	arch        TEXT NOT NULL DEFAULT '',
	quant       TEXT NOT NULL DEFAULT '',
	size_bytes  INTEGER NOT NULL DEFAULT 0,
	params      INTEGER NOT NULL DEFAULT 0,
	updated_at_ms INTEGER NOT NULL
);
CREATE INDEX models_sha256 ON models(sha256);
CREATE TABLE bench_runs (
	id              INTEGER PRIMARY KEY,
	created_at_ms   INTEGER NOT NULL,
	source          TEXT NOT NULL DEFAULT 'vkllm',
	status          TEXT NOT NULL CHECK (status IN ('ok','failed','cancelled')),
	error           TEXT NOT NULL DEFAULT '',
	backend         TEXT NOT NULL DEFAULT '',
	gpu_key         TEXT NOT NULL DEFAULT '',
	gpu_name        TEXT NOT NULL DEFAULT '',
	gpu_vendor_id   INTEGER NOT NULL DEFAULT 0,
	gpu_device_id   INTEGER NOT NULL DEFAULT 0,
	gpu_uuid        TEXT NOT NULL DEFAULT '',
	driver_name     TEXT NOT NULL DEFAULT '',
	driver_version  TEXT NOT NULL DEFAULT '',
	vulkan_api      TEXT NOT NULL DEFAULT '',
	hostname        TEXT NOT NULL DEFAULT '',
	os              TEXT NOT NULL DEFAULT '',
	kernel          TEXT NOT NULL DEFAULT '',
	cpu             TEXT NOT NULL DEFAULT '',
	ram_bytes       INTEGER NOT NULL DEFAULT 0,
	threads         INTEGER NOT NULL DEFAULT 0,
	engine_version  TEXT NOT NULL DEFAULT '',
	engine_commit   TEXT NOT NULL DEFAULT '',
	model_file      TEXT NOT NULL DEFAULT '',
	model_sha256    TEXT NOT NULL DEFAULT '',
	model_arch      TEXT NOT NULL DEFAULT '',
	model_type      TEXT NOT NULL DEFAULT '',
	model_params    INTEGER NOT NULL DEFAULT 0,
	model_quant     TEXT NOT NULL DEFAULT '',
	model_size      INTEGER NOT NULL DEFAULT 0,
	context         INTEGER NOT NULL DEFAULT 0,
	placement       TEXT NOT NULL DEFAULT '',
	plan_verdict    TEXT NOT NULL DEFAULT '',
	plan_headroom_bytes INTEGER NOT NULL DEFAULT 0,
	plan_source     TEXT NOT NULL DEFAULT '',
	plan_pin_mb     INTEGER NOT NULL DEFAULT 0,
	test            TEXT NOT NULL DEFAULT '',
	n_prompt        INTEGER NOT NULL DEFAULT 0,
	n_gen           INTEGER NOT NULL DEFAULT 0,
	reps            INTEGER NOT NULL DEFAULT 0,
	warmup          INTEGER NOT NULL DEFAULT 0,
	avg_ns          INTEGER NOT NULL DEFAULT 0,
	stddev_ns       INTEGER NOT NULL DEFAULT 0,
	avg_ts          REAL NOT NULL DEFAULT 0,
	stddev_ts       REAL NOT NULL DEFAULT 0,
	ttft_ns         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX bench_runs_gpu ON bench_runs(gpu_key, gpu_name);
CREATE INDEX bench_runs_model ON bench_runs(model_sha256, model_file);
CREATE TABLE bench_samples (
	run_id          INTEGER NOT NULL REFERENCES bench_runs(id) ON DELETE CASCADE,
	rep             INTEGER NOT NULL,
	ns              INTEGER NOT NULL,
	tokens_per_sec  REAL NOT NULL,
	PRIMARY KEY (run_id, rep)
);
CREATE TABLE conversations (
	id              INTEGER PRIMARY KEY,
	title           TEXT NOT NULL DEFAULT '',
	model           TEXT NOT NULL DEFAULT '',
	created_at_ms   INTEGER NOT NULL,
	updated_at_ms   INTEGER NOT NULL
);
CREATE TABLE messages (
	id              INTEGER PRIMARY KEY,
	conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
	role            TEXT NOT NULL CHECK (role IN ('system','user','assistant')),
	content         TEXT NOT NULL DEFAULT '',
	state           TEXT NOT NULL CHECK (state IN ('complete','streaming','interrupted','error')),
	model           TEXT NOT NULL DEFAULT '',
	tokens_per_sec  REAL NOT NULL DEFAULT 0,
	ttft_ms         INTEGER NOT NULL DEFAULT 0,
	settings        TEXT NOT NULL DEFAULT '',
	created_at_ms   INTEGER NOT NULL
);
CREATE INDEX messages_conversation ON messages(conversation_id, id);
`,
	// 2: bench runs at depth (llama-bench's -d) and the model's load time. Rows from before
	// keep their values and read as depth 0, load not timed.
	`
ALTER TABLE bench_runs ADD COLUMN n_depth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_runs ADD COLUMN load_ns INTEGER NOT NULL DEFAULT 0;
`,
	// 3: each conversation's context-overflow policy. Conversations from before keep their rows
	// and take the default, the rolling window.
	`
ALTER TABLE conversations ADD COLUMN context_policy TEXT NOT NULL DEFAULT 'rolling';
`,
	// 4: each conversation's generation settings (JSON; '' = the app's defaults) and why each
	// reply ended ('' for replies from before, and for user messages).
	`
ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';
`,
	// 5: a deleted conversation waits in the trash (deleted_at_ms > 0) while the UI offers Undo;
	// Open removes what a run left there.
	`
ALTER TABLE conversations ADD COLUMN deleted_at_ms INTEGER NOT NULL DEFAULT 0;
`,
	// 6: a regenerated reply keeps its earlier versions as alternatives (message_alternatives,
	// one row per version; messages.alt_index says which one the messages row holds), and each
	// model's load options (context, device, KV cache type as JSON) by its path ('' = the
	// embedded model).
	`
ALTER TABLE messages ADD COLUMN alt_index INTEGER NOT NULL DEFAULT 0;
CREATE TABLE message_alternatives (
	message_id      INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
	n               INTEGER NOT NULL CHECK (n >= 0),
	content         TEXT NOT NULL DEFAULT '',
	state           TEXT NOT NULL CHECK (state IN ('complete','streaming','interrupted','error')),
	model           TEXT NOT NULL DEFAULT '',
	tokens_per_sec  REAL NOT NULL DEFAULT 0,
	ttft_ms         INTEGER NOT NULL DEFAULT 0,
	settings        TEXT NOT NULL DEFAULT '',
	stop_reason     TEXT NOT NULL DEFAULT '',
	created_at_ms   INTEGER NOT NULL,
	PRIMARY KEY (message_id, n)
);
CREATE TABLE model_load_options (
	model_path      TEXT PRIMARY KEY,
	options         TEXT NOT NULL,
	updated_at_ms   INTEGER NOT NULL
);
`,
	// 7: the model library: the GGUF files a scan found (one row per model, a split model's
	// parts together under its first part's path; scan_key holds the parts' sizes and dates so
	// an unchanged file is not read again; problem says why the engine cannot run it), the
	// folders the user added to the scan, and the models opened recently.
	`
CREATE TABLE library_models (
	id              INTEGER PRIMARY KEY,
	path            TEXT NOT NULL UNIQUE,
	source          TEXT NOT NULL DEFAULT '',
	name            TEXT NOT NULL DEFAULT '',
	arch            TEXT NOT NULL DEFAULT '',
	params          INTEGER NOT NULL DEFAULT 0,
	quant           TEXT NOT NULL DEFAULT '',
	size_bytes      INTEGER NOT NULL DEFAULT 0,
	context_length  INTEGER NOT NULL DEFAULT 0,
	parts           INTEGER NOT NULL DEFAULT 1,
	file_mtime_ms   INTEGER NOT NULL DEFAULT 0,
	header_only     INTEGER NOT NULL DEFAULT 0,
	problem         TEXT NOT NULL DEFAULT '',
	scan_key        TEXT NOT NULL DEFAULT '',
	updated_at_ms   INTEGER NOT NULL
);
CREATE TABLE library_folders (
	path            TEXT PRIMARY KEY,
	added_at_ms     INTEGER NOT NULL
);
CREATE TABLE recent_models (
	path            TEXT PRIMARY KEY,
	opened_at_ms    INTEGER NOT NULL
);
`,
	// 8: the run each bench row belongs to (run_key: the rows of one click, one `vkllm bench`
	// or one llama-bench invocation in an imported file share it), so "N runs" counts runs, not
	// rows. Rows from before keep '' and count as a run each.
	`
ALTER TABLE bench_runs ADD COLUMN run_key TEXT NOT NULL DEFAULT '';
CREATE INDEX bench_runs_dedupe ON bench_runs(source, test, model_file, avg_ns);
`,
	// 9: conversation search through FTS5. The index itself (conversation_search, one row per
	// conversation: its title and its messages' text) is a cache that Open creates only where
	// the linked SQLite has FTS5 (search.go), so this migration never needs the module: triggers
	// put every conversation whose title or messages change into conversation_search_queue, a
	// plain table, and the search reindexes what is queued before it reads. Every conversation
	// from before starts queued, so the first search backfills the index; a binary without
	// FTS5 searches with LIKE and keeps queueing.
	`
CREATE TABLE conversation_search_queue (
	conversation_id INTEGER PRIMARY KEY -- no foreign key: a deleted conversation's rows leave the index too
);
INSERT INTO conversation_search_queue(conversation_id) SELECT id FROM conversations;
CREATE TRIGGER conversation_search_new AFTER INSERT ON conversations BEGIN
	INSERT OR IGNORE INTO conversation_search_queue(conversation_id) VALUES (new.id);
END;
CREATE TRIGGER conversation_search_title AFTER UPDATE OF title ON conversations BEGIN
	INSERT OR IGNORE INTO conversation_search_queue(conversation_id) VALUES (new.id);
END;
CREATE TRIGGER conversation_search_gone AFTER DELETE ON conversations BEGIN
	INSERT OR IGNORE INTO conversation_search_queue(conversation_id) VALUES (old.id);
END;
CREATE TRIGGER conversation_search_message_new AFTER INSERT ON messages BEGIN
	INSERT OR IGNORE INTO conversation_search_queue(conversation_id) VALUES (new.conversation_id);
END;
CREATE TRIGGER conversation_search_message_edit AFTER UPDATE OF content, conversation_id ON messages BEGIN
	INSERT OR IGNORE INTO conversation_search_queue(conversation_id) VALUES (old.conversation_id);
	INSERT OR IGNORE INTO conversation_search_queue(conversation_id) VALUES (new.conversation_id);
END;
CREATE TRIGGER conversation_search_message_gone AFTER DELETE ON messages BEGIN
	INSERT OR IGNORE INTO conversation_search_queue(conversation_id) VALUES (old.conversation_id);
END;
`,
	// 10: how a bench row's tg steps ran ("logits", "greedy", "greedy-chained"): a greedy
	// generation chained on the device runs faster than steps that read back their logits, so
	// a comparison across vkllm versions says which it compares. Rows from before keep ''.
	`
ALTER TABLE bench_runs ADD COLUMN decode TEXT NOT NULL DEFAULT '';
`,
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int { return len(migrations) }

// migrate applies every migration newer than the file's version. Each runs in one IMMEDIATE
// transaction that re-reads the version first, so two processes opening a fresh file at once
// apply each migration exactly once.
func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY, applied_at_ms INTEGER NOT NULL)`); err != nil {
		return s.fail("create schema_version", err)
	}
	for i, m := range migrations {
		version := i + 1
		err := s.tx(ctx, fmt.Sprintf("apply migration %d", version), func(tx *sql.Tx) error {
			var cur int
			if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_version").Scan(&cur); err != nil {
				return err
			}
			if cur > len(migrations) {
				return fmt.Errorf("the database has schema version %d but this vkllm knows only up to %d (upgrade vkllm, or point VKLLM_DATA_DIR elsewhere)", cur, len(migrations))
			}
			if cur >= version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO schema_version(version, applied_at_ms) VALUES (?, ?)", version, nowMs())
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Version returns the schema version recorded in the file.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_version").Scan(&v); err != nil {
		return 0, s.fail("read schema version", err)
	}
	return v, nil
}
