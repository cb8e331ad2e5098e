// Package sharedtest locates the project's shared test data for tests: the directory shared/
// beside the repository (models, llama.cpp reference outputs, tokenizer vocabularies; see
// ../shared/README.md). It is imported only from _test.go files.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Path returns <repository root>/../shared/<sub...>. When the repository root (the directory with
// go.mod above the test's working directory) or the path itself is missing, the test is skipped
// with the reason, never silently.
func Path(t testing.TB, sub ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("locate shared test data: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("skipping: no go.mod above the test directory, so the shared test data cannot be located")
		}
		dir = parent
	}
	p := filepath.Join(append([]string{dir, "..", "shared"}, sub...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("skipping: shared test data %s is absent (%v)", p, err)
	}
	return p
}
