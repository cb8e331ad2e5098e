package sidecar

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestTokenFileNeverBlocksTheNextStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(path string) error // the state a previous start left
	}{
		{"no file", func(string) error { return nil }},
		{"empty file from a start cut short", func(p string) error { return os.WriteFile(p, nil, 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, TokenFileName)
			if err := tc.before(path); err != nil {
				t.Fatal(err)
			}
			tok, err := loadOrCreateToken(path)
			if err != nil {
				t.Fatalf("start after %s: %v", tc.name, err)
			}
			if got, err := readToken(path); err != nil || got != tok || len(tok) != 2*tokenBytes {
				t.Fatalf("token file holds %q, %v; want the token returned, %q", got, err, tok)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("%d files in the token folder, want only the token (no temporary left)", len(entries))
			}
		})
	}
}

func TestConcurrentStartsAgreeOnOneToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), TokenFileName)
	toks := make([]string, 8)
	errs := make([]error, len(toks))
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() { toks[i], errs[i] = loadOrCreateToken(path) })
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Fatalf("start %d: %q, %v; want every start to read %q", i, toks[i], errs[i], toks[0])
		}
	}
}
