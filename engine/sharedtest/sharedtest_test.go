package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPathFindsTheSharedModelsBesideTheRepository(t *testing.T) {
	p := Path(t, "models", "stories260K.gguf")
	if filepath.Base(p) != "stories260K.gguf" || filepath.Base(filepath.Dir(filepath.Dir(p))) != "shared" {
		t.Fatalf("Path = %s", p)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}

// A missing entry skips (with its reason) instead of failing or passing silently.
func TestPathSkipsForAMissingEntry(t *testing.T) {
	var skipped bool
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Path(t, "no-such-entry-here")
		t.Error("Path returned for a missing entry")
	})
	if !skipped {
		t.Fatal("a missing shared entry did not skip the test")
	}
}
