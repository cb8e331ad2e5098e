//go:build unix

package bench

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadLlamaBenchFileRefusesWhatCouldHangOrFillMemory(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "peer.jsonl")
	if err := os.WriteFile(good, []byte(`{"n_prompt":512,"avg_ts":900}`+"\n"+`{"n_gen":128,"avg_ts":80}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxLlamaBenchBytes + 1); err != nil { // sparse: nothing written
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct {
		name, path, wantErr string
	}{
		{"llama-bench JSONL", good, ""},
		{"a named pipe", fifo, "a named pipe (FIFO), not a regular file"},
		{"an endless device", "/dev/zero", "a character device, not a regular file"},
		{"a directory", dir, "a directory, not a regular file"},
		{"over the size bound", huge, "more than the 67108864 of any llama-bench output"},
		{"missing", filepath.Join(dir, "missing.json"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			recs, err := ReadLlamaBenchFile(tc.path)
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("took %v", took)
			}
			if tc.wantErr == "" {
				if err != nil || len(recs) != 2 || recs[0].TestName() != "pp512" {
					t.Fatalf("records %+v, %v", recs, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("error %v, want one naming %s and saying %q", err, tc.path, tc.wantErr)
			}
		})
	}
}
