package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// LoadOptions returns the load options saved for the model at path ("" = the embedded model) as
// the JSON the app wrote; ok is false when none were saved.
func (s *Store) LoadOptions(ctx context.Context, path string) (options string, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT options FROM model_load_options WHERE model_path = ?", path).Scan(&options)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.fail(fmt.Sprintf("read the load options of model %q", path), err)
	}
	return options, true, nil
}

// SetLoadOptions saves the load options of the model at path (JSON; the app checks it), replacing
// what was saved before.
func (s *Store) SetLoadOptions(ctx context.Context, path, options string) error {
	return s.tx(ctx, fmt.Sprintf("save the load options of model %q", path), func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO model_load_options(model_path, options, updated_at_ms) VALUES (?, ?, ?)
			ON CONFLICT(model_path) DO UPDATE SET options = excluded.options, updated_at_ms = excluded.updated_at_ms`, path, options, nowMs())
		return err
	})
}
