package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// LibraryModel is one model of the library: a GGUF file (a split model's parts together, under
// its first part's path) that a scan of the model folders found.
type LibraryModel struct {
	Path          string `json:"path"`
	Source        string `json:"source"` // the folder kind that holds it: llama.cpp, lmstudio, ollama, huggingface, folder
	Name          string `json:"name"`
	Arch          string `json:"arch"`
	Params        int64  `json:"params"`
	Quant         string `json:"quant"`
	SizeBytes     int64  `json:"sizeBytes"` // every part together
	ContextLength int    `json:"contextLength"`
	Parts         int    `json:"parts"`
	FileMtimeMs   int64  `json:"fileMtimeMs"`
	HeaderOnly    bool   `json:"headerOnly"` // the file lacks (some of) its weights
	// Problem says, in one sentence, why the engine cannot run the model ("" = it can).
	Problem string `json:"problem"`
	// ScanKey is the parts' sizes and modification times when the row was read: a scan that
	// finds the same key does not read the file again.
	ScanKey string `json:"-"`
}

const libraryColumns = "path, source, name, arch, params, quant, size_bytes, context_length, parts, file_mtime_ms, header_only, problem, scan_key"

// LibraryModels lists the library by name, then path.
func (s *Store) LibraryModels(ctx context.Context) ([]LibraryModel, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+libraryColumns+" FROM library_models ORDER BY name COLLATE NOCASE, path")
	if err != nil {
		return nil, s.fail("list the model library", err)
	}
	defer rows.Close()
	out := []LibraryModel{}
	for rows.Next() {
		var m LibraryModel
		if err := rows.Scan(&m.Path, &m.Source, &m.Name, &m.Arch, &m.Params, &m.Quant, &m.SizeBytes, &m.ContextLength,
			&m.Parts, &m.FileMtimeMs, &m.HeaderOnly, &m.Problem, &m.ScanKey); err != nil {
			return nil, s.fail("list the model library", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list the model library", err)
	}
	return out, nil
}

// SaveLibraryModel records a model of the library by its path.
func (s *Store) SaveLibraryModel(ctx context.Context, m LibraryModel) error {
	if m.Path == "" {
		return errors.New("save library model: empty path")
	}
	return s.tx(ctx, "save library model "+m.Path, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO library_models(`+libraryColumns+`, updated_at_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(path) DO UPDATE SET source=excluded.source, name=excluded.name, arch=excluded.arch,
				params=excluded.params, quant=excluded.quant, size_bytes=excluded.size_bytes,
				context_length=excluded.context_length, parts=excluded.parts, file_mtime_ms=excluded.file_mtime_ms,
				header_only=excluded.header_only, problem=excluded.problem, scan_key=excluded.scan_key,
				updated_at_ms=excluded.updated_at_ms`,
			m.Path, m.Source, m.Name, m.Arch, m.Params, m.Quant, m.SizeBytes, m.ContextLength, max(m.Parts, 1),
			m.FileMtimeMs, m.HeaderOnly, m.Problem, m.ScanKey, nowMs())
		return err
	})
}

// PruneLibrary removes every library model whose path is not in keep (the models a whole scan
// found) and says how many went.
func (s *Store) PruneLibrary(ctx context.Context, keep []string) (int, error) {
	keepSet := make(map[string]bool, len(keep))
	for _, p := range keep {
		keepSet[p] = true
	}
	var removed int
	err := s.tx(ctx, "prune the model library", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT path FROM library_models")
		if err != nil {
			return err
		}
		var gone []string
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return err
			}
			if !keepSet[p] {
				gone = append(gone, p)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, p := range gone {
			if _, err := tx.ExecContext(ctx, "DELETE FROM library_models WHERE path = ?", p); err != nil {
				return err
			}
		}
		removed = len(gone)
		return nil
	})
	return removed, err
}

// LibraryFolders lists the folders the user added to the scan, oldest first.
func (s *Store) LibraryFolders(ctx context.Context) ([]string, error) {
	return s.paths(ctx, "list the library folders", "SELECT path FROM library_folders ORDER BY added_at_ms, path")
}

// AddLibraryFolder adds a folder to the scan (again: no change).
func (s *Store) AddLibraryFolder(ctx context.Context, path string) error {
	if strings.TrimSpace(path) == "" {
		return errors.New("add library folder: empty path")
	}
	return s.tx(ctx, "add library folder "+path, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO library_folders(path, added_at_ms) VALUES (?, ?) ON CONFLICT(path) DO NOTHING", path, nowMs())
		return err
	})
}

// RemoveLibraryFolder takes a folder out of the scan.
func (s *Store) RemoveLibraryFolder(ctx context.Context, path string) error {
	return s.tx(ctx, "remove library folder "+path, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "DELETE FROM library_folders WHERE path = ?", path)
		return err
	})
}

// RecentModels lists the models opened most recently, newest first, at most limit.
func (s *Store) RecentModels(ctx context.Context, limit int) ([]string, error) {
	return s.paths(ctx, "list the recent models", fmt.Sprintf("SELECT path FROM recent_models ORDER BY opened_at_ms DESC, path LIMIT %d", max(limit, 0)))
}

// AddRecentModel records that the model at path was opened now.
func (s *Store) AddRecentModel(ctx context.Context, path string) error {
	if path == "" {
		return errors.New("add recent model: empty path")
	}
	return s.tx(ctx, "add recent model "+path, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO recent_models(path, opened_at_ms) VALUES (?, ?)
			ON CONFLICT(path) DO UPDATE SET opened_at_ms = excluded.opened_at_ms`, path, nowMs())
		return err
	})
}

// paths runs a query of one text column.
func (s *Store) paths(ctx context.Context, op, query string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, s.fail(op, err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, s.fail(op, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(op, err)
	}
	return out, nil
}
