package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Model is one GGUF file vkllm has opened.
type Model struct {
	ID        int64  `json:"id"`
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
	Arch      string `json:"arch"`
	Quant     string `json:"quant"`
	SizeBytes int64  `json:"size_bytes"`
	Params    int64  `json:"params"`
}

// UpsertModel records a model by path and returns its id.
func (s *Store) UpsertModel(ctx context.Context, m Model) (int64, error) {
	if m.Path == "" {
		return 0, errors.New("save model: empty path")
	}
	var id int64
	err := s.tx(ctx, "save model "+m.Path, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO models(path, sha256, arch, quant, size_bytes, params, updated_at_ms)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(path) DO UPDATE SET sha256=excluded.sha256, arch=excluded.arch, quant=excluded.quant,
				size_bytes=excluded.size_bytes, params=excluded.params, updated_at_ms=excluded.updated_at_ms
			RETURNING id`, m.Path, m.SHA256, m.Arch, m.Quant, m.SizeBytes, m.Params, nowMs()).Scan(&id)
	})
	return id, err
}

// ModelByPath returns the recorded model at path; ok is false when it was never recorded.
func (s *Store) ModelByPath(ctx context.Context, path string) (m Model, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT id, path, sha256, arch, quant, size_bytes, params FROM models WHERE path = ?", path).
		Scan(&m.ID, &m.Path, &m.SHA256, &m.Arch, &m.Quant, &m.SizeBytes, &m.Params)
	if errors.Is(err, sql.ErrNoRows) {
		return Model{}, false, nil
	}
	if err != nil {
		return Model{}, false, s.fail(fmt.Sprintf("read model %s", path), err)
	}
	return m, true, nil
}

// Models lists every recorded model by path.
func (s *Store) Models(ctx context.Context) ([]Model, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, path, sha256, arch, quant, size_bytes, params FROM models ORDER BY path")
	if err != nil {
		return nil, s.fail("list models", err)
	}
	defer rows.Close()
	var out []Model
	for rows.Next() {
		var m Model
		if err := rows.Scan(&m.ID, &m.Path, &m.SHA256, &m.Arch, &m.Quant, &m.SizeBytes, &m.Params); err != nil {
			return nil, s.fail("list models", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list models", err)
	}
	return out, nil
}
