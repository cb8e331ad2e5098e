//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package gguf

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Paths that name something other than a regular file are refused at once, before they are
// opened: opening a FIFO with no writer would block forever.
func TestNonRegularPathsAreRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "link.gguf")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.gguf")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen on a unix socket: %v", err)
	}
	defer ln.Close()
	cases := []struct{ name, path, kind string }{
		{"FIFO", fifo, "a named pipe (FIFO)"},
		{"symbolic link to a FIFO", link, "a named pipe (FIFO)"},
		{"directory", dir, "a directory"},
		{"character device", os.DevNull, "a character device"},
		{"socket", sock, "a socket"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := Open(c.path); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.kind) {
					t.Fatalf("Open(%s): %v, want ErrNotRegular naming the path and %q", c.path, err, c.kind)
				}
			case <-time.After(2 * time.Second):
				t.Fatalf("Open(%s) still blocked after 2s", c.path)
			}
		})
	}
}
