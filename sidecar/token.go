package sidecar

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// tokenBytes is the size of a generated token before hex encoding.
const tokenBytes = 32

func newToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// loadOrCreateToken reads the token in path, or, when the file does not exist, writes a fresh
// random one there with mode 0600. The token is written whole into a temporary file that is then
// linked into place, which fails when the file exists: two processes agree on one token, and a
// kill or a full disk midway never leaves an empty or partial token file. An empty file left by
// an older version is replaced.
func loadOrCreateToken(path string) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create token folder %s: %w (make it writable or pass --token-file)", dir, err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() == 0 {
		slog.Warn("token file is empty (a start that was cut short); writing a fresh token", "path", path)
		os.Remove(path)
	}
	tok, err := newToken()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", fmt.Errorf("create token file %s: %w (make its folder writable or pass --token-file)", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.WriteString(tok + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return "", fmt.Errorf("write token file %s: %w (free some disk space or pass --token-file)", path, err)
	}
	err = os.Link(tmp, path)
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create token file %s: %w (make its folder writable or pass --token-file)", path, err)
	}
	return readToken(path)
}

// readToken reads a token file written by loadOrCreateToken or by the supervisor.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 16 {
		return "", fmt.Errorf("token file %s holds %d characters, want at least 16 (delete it and a fresh token is written)", path, len(tok))
	}
	return tok, nil
}

// writeTokenFile puts tok in path with mode 0600, through a temporary file and a rename so a
// reader never sees it half written.
func writeTokenFile(path, tok string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return fmt.Errorf("write token file %s: %w (make its folder writable or set VKLLM_DATA_DIR)", path, err)
	}
	_, werr := f.WriteString(tok + "\n")
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write token file %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write token file %s: %w", path, err)
	}
	return nil
}
