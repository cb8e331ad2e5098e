//go:build linux

package gguf

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/vkllm/vkllm/engine/quant"
)

// Prefault maps a model's tensor data into the process (its mapping's resident set grows to
// the data's size without a read of ours), and Close stops a run in flight and waits for it
// before unmapping (the run touches no unmapped page: the test process would crash).
func TestPrefaultMapsTheDataAndCloseStopsIt(t *testing.T) {
	defer func(prev int) { prefaultChunk = prev }(prefaultChunk)
	prefaultChunk = 64 << 10
	path := filepath.Join(t.TempDir(), "prefault.gguf")
	w := NewWriter()
	data := make([]byte, 8<<20) // 8 MiB of F32 data: 128 chunks
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := w.AddTensor("blob", quant.F32, []uint64{uint64(len(data) / 4)}, data); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		closeAtOnce bool
	}{{"to the end", false}, {"closed while running", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.mapped) != 1 || len(f.mapped[0]) < len(data) {
				t.Fatalf("mapped regions %d, want one of at least %d bytes", len(f.mapped), len(data))
			}
			region := f.mapped[0]
			before := residentKB(t, region)
			f.Prefault(4)
			if tc.closeAtOnce {
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				if f.mapped != nil || !f.prefault.stop.Load() {
					t.Fatal("Close left the mapping or the prefault run")
				}
				return
			}
			f.prefault.wg.Wait()
			after := residentKB(t, region)
			if want := len(data) / 1024; after < want || after <= before {
				t.Fatalf("mapping resident %d KiB before and %d KiB after the prefault, want at least %d after", before, after, want)
			}
			t.Logf("resident %d KiB -> %d KiB", before, after)
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A file held in memory has no mapping: Prefault does nothing.
func TestPrefaultOfBytesDoesNothing(t *testing.T) {
	w := NewWriter()
	if err := w.AddTensor("blob", quant.F32, []uint64{4}, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenBytes("mem", b)
	if err != nil {
		t.Fatal(err)
	}
	f.Prefault(2)
	if f.prefault != nil {
		t.Fatal("Prefault ran over a file held in memory")
	}
}

// residentKB is the Rss of the mapping that holds b, from /proc/self/smaps.
func residentKB(t *testing.T, b []byte) int {
	t.Helper()
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	fh, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps to read a mapping's resident size from: %v", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	inside := false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := addrRange(line); ok {
			inside = addr >= lo && addr < hi
			continue
		}
		if inside && strings.HasPrefix(line, "Rss:") {
			kb, err := strconv.Atoi(strings.Fields(line)[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	return 0
}

// addrRange parses a smaps mapping line's "lo-hi" field.
func addrRange(line string) (lo, hi uint64, ok bool) {
	field, _, _ := strings.Cut(line, " ")
	a, b, found := strings.Cut(field, "-")
	if !found {
		return 0, 0, false
	}
	var err error
	if lo, err = strconv.ParseUint(a, 16, 64); err != nil {
		return 0, 0, false
	}
	if hi, err = strconv.ParseUint(b, 16, 64); err != nil {
		return 0, 0, false
	}
	return lo, hi, true
}
