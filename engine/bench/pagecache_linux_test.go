package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPageCacheFractionOfAJustWrittenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, 3*os.Getpagesize()+5), 0o644); err != nil {
		t.Fatal(err)
	}
	frac, err := PageCacheFraction(path)
	if err != nil || frac != 1 {
		t.Errorf("a file just written: %.2f in the page cache, %v; want 1", frac, err)
	}
	if _, err := PageCacheFraction(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v, want an error naming it", err)
	}
}
