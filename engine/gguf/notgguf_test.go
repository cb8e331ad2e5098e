package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A file that is not GGUF is named and called "not a GGUF file", with what to do; its bytes and
// size are not quoted (a path handed to /vkllm/plan may name any file on the machine).
func TestNotGGUFFilesAreCalledThatWithoutQuotingThem(t *testing.T) {
	cases := []struct {
		name    string
		content string
		secret  string // text of the file that must not appear in the error
	}{
		{"a text file", "root:x:0:0:root:/root:/bin/bash\n", "root"},
		{"a short file", "ab", "ab"},
		{"a PNG image", "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 100), "PNG"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "model.gguf")
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path)
			if !errors.Is(err, ErrNotGGUF) {
				t.Fatalf("Open: %v, want ErrNotGGUF", err)
			}
			msg := strings.TrimPrefix(err.Error(), "gguf "+path)
			if !strings.Contains(msg, "not a GGUF file") || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not say %q naming the file", err, "not a GGUF file")
			}
			if strings.Contains(msg, c.secret) || strings.Contains(msg, strconv.Itoa(len(c.content))) || strings.Contains(msg, "offset") {
				t.Errorf("error %q quotes the file's bytes, size or an offset", err)
			}
		})
	}
}
