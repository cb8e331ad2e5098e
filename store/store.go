// Package store keeps everything vkllm must not lose in one SQLite file: the machines and GPUs it
// has seen, per-GPU VRAM pins, known models, every benchmark run with its samples, and the chat
// history. The desktop app and the CLI may hold the file open and write at the same time.
//
// Durability choices (the file is opened with these on every connection):
//   - journal_mode=WAL: readers never block the writer and a crash mid-write leaves the last
//     committed state intact (the WAL is replayed or ignored, never half-applied).
//   - synchronous=FULL: every commit fsyncs the WAL before it returns. NORMAL would already survive
//     a killed process, but after a power cut or kernel panic it may roll back the last commits;
//     "nothing ever lost" means a row whose commit returned is on disk, so FULL. Our write rate is
//     low (chat turns, bench runs, pins), so the fsync per commit costs nothing a user notices.
//   - foreign_keys=ON, busy_timeout=5000 ms, and BEGIN IMMEDIATE for every transaction so two
//     processes that both write wait for each other instead of failing with SQLITE_BUSY.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/vkllm/vkllm/engine/config"
)

// FileName is the database file inside the data dir.
const FileName = "vkllm.db"

// BusyTimeout is how long a write waits for another process's write to finish.
const BusyTimeout = 5 * time.Second

// Store is an open vkllm database. It is safe for concurrent use.
type Store struct {
	db        *sql.DB
	path      string
	machineID int64
	fts       bool // the linked SQLite has FTS5 and the conversation search index is there (search.go)
}

// DefaultDir is where the store and the sidecar token live: VKLLM_DATA_DIR when set, else the
// OS user data dir ($XDG_DATA_HOME/vkllm or ~/.local/share/vkllm on Linux).
func DefaultDir() (string, error) {
	if config.DataDir.Set() {
		return config.DataDir.String(), nil
	}
	dir, err := userDataDir()
	if err != nil {
		return "", fmt.Errorf("find the user data dir: %w (set VKLLM_DATA_DIR to a writable folder)", err)
	}
	return filepath.Join(dir, "vkllm"), nil
}

// Open opens (creating if needed) the database in dir and brings its schema up to date. dir ""
// means DefaultDir(). It also records the local machine so pins can be kept per machine.
func Open(dir string) (*Store, error) {
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w (make it writable or set VKLLM_DATA_DIR to a writable folder)", dir, err)
	}
	path := filepath.Join(dir, FileName)
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "on")
	q.Set("_busy_timeout", fmt.Sprint(BusyTimeout.Milliseconds()))
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, explain(path, "open database", err)
	}
	s := &Store{db: db, path: path}
	ctx := context.Background()
	if err := s.checkWaiting(ctx); err != nil {
		db.Close()
		return nil, err
	}
	// The chat history is private: keep the file (and the WAL and shm files SQLite creates with
	// the same mode) readable by the owner only. A file we do not own keeps its mode.
	if err := os.Chmod(path, 0o600); err != nil {
		slog.Debug("restrict database file mode", "path", path, "err", err)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.openSearch(ctx); err != nil {
		db.Close()
		return nil, err
	}
	// A conversation deleted in an earlier run whose Undo never expired there (the app closed
	// first) is removed now: the trash lives for one run.
	if n, err := s.PurgeTrash(ctx); err != nil {
		db.Close()
		return nil, err
	} else if n > 0 {
		slog.Info("removed conversations left in the trash", "count", n)
	}
	id, err := s.UpsertMachine(ctx, LocalMachine())
	if err != nil {
		db.Close()
		return nil, err
	}
	s.machineID = id
	return s, nil
}

// checkWaiting is check, tried again for up to BusyTimeout while the file is busy: a process
// opening a fresh file at the same moment as another can be told "database is locked" at once
// (the switch to WAL and the creation of its index do not wait in SQLite's busy handler).
func (s *Store) checkWaiting(ctx context.Context) error {
	deadline := time.Now().Add(BusyTimeout)
	pause := 5 * time.Millisecond
	for {
		err := s.check(ctx)
		var se sqlite3.Error
		if err == nil || !errors.As(err, &se) || se.Code != sqlite3.ErrBusy && se.Code != sqlite3.ErrLocked || time.Now().After(deadline) {
			return err
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// check makes sure the file is a readable SQLite database in WAL mode before anything is written.
func (s *Store) check(ctx context.Context) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return explain(s.path, "open database", err)
	}
	if _, err := s.db.ExecContext(ctx, "SELECT count(*) FROM sqlite_master"); err != nil {
		return explain(s.path, "read schema", err)
	}
	if mode != "wal" {
		return explain(s.path, "switch to WAL journal", fmt.Errorf("journal_mode is %q", mode))
	}
	return nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", s.path, err)
	}
	return nil
}

// IntegrityCheck runs PRAGMA integrity_check and returns its first line ("ok" when healthy).
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	var res string
	if err := s.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res); err != nil {
		return "", explain(s.path, "integrity check", err)
	}
	return res, nil
}

// explain wraps a database error with the file and, for the failures a user can fix, the remedy.
func explain(path, op string, err error) error {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("%s %s: %w", op, path, err)
	}
	switch se.Code {
	case sqlite3.ErrFull:
		return fmt.Errorf("%s %s: the disk is full: %w (free some space on that disk or set VKLLM_DATA_DIR to a folder on another disk)", op, path, err)
	case sqlite3.ErrReadonly, sqlite3.ErrPerm:
		return fmt.Errorf("%s %s: the database is read-only: %w (make the file and its folder writable, or set VKLLM_DATA_DIR to a writable folder)", op, path, err)
	case sqlite3.ErrCantOpen:
		return fmt.Errorf("%s %s: cannot open the file: %w (check that the folder exists and is writable, or set VKLLM_DATA_DIR to a writable folder)", op, path, err)
	case sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
		return fmt.Errorf("%s %s: the file is not a valid vkllm database (corrupt): %w (move it aside, vkllm creates a fresh one on the next start; keep the old file to recover data with the sqlite3 .recover command)", op, path, err)
	case sqlite3.ErrIoErr:
		return fmt.Errorf("%s %s: disk I/O error: %w (check the disk; if it is full free some space)", op, path, err)
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return fmt.Errorf("%s %s: the database stayed locked by another vkllm process for over %s: %w (close other vkllm instances or retry)", op, path, BusyTimeout, err)
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// fail is explain bound to this store's file.
func (s *Store) fail(op string, err error) error { return explain(s.path, op, err) }

func nowMs() int64 { return time.Now().UnixMilli() }

// tx runs fn in one transaction (BEGIN IMMEDIATE) and commits it.
func (s *Store) tx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.fail(op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return s.fail(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.fail(op, err)
	}
	return nil
}
