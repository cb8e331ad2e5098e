package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// TestOpenHeaderTakesAFileCutAfterItsHeader cuts a file written by our writer at several
// offsets: OpenHeader takes every cut that keeps the header whole (the tensors it cannot hold
// marked Absent and counted in MissingBytes) and refuses a cut inside the header with
// ErrTruncated saying so; Open, for loading, refuses every cut and names it.
func TestOpenHeaderTakesAFileCutAfterItsHeader(t *testing.T) {
	w := NewWriter()
	w.SetString(KeyArchitecture, "llama")
	w.SetString(KeyName, "cut test")
	for _, name := range []string{"a", "b", "c"} {
		if err := w.AddTensorF32(name, quant.F32, []uint64{64, 4}, make([]float32, 256)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	whole, err := OpenBytes("whole", b)
	if err != nil {
		t.Fatal(err)
	}
	data := int(whole.DataOffset)
	const tensor = 64 * 4 * 4
	cases := []struct {
		name    string
		cut     int
		missing int64 // -1: OpenHeader refuses it
		absent  int
	}{
		{"whole", len(b), 0, 0},
		{"inside the last tensor", len(b) - 10, 10, 1},
		{"between tensors", data + tensor, 2 * tensor, 2},
		{"at the data", data, 3 * tensor, 3},
		{"inside the header", data - 40, -1, 0},
		{"after the magic", 4, -1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := os.WriteFile(path, b[:c.cut], 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := OpenHeader(path)
			if c.missing < 0 {
				if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "ends inside its header") {
					t.Fatalf("OpenHeader: %v, want ErrTruncated saying the header is cut", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenHeader: %v", err)
			}
			defer f.Close()
			absent := 0
			for _, ti := range f.Tensors {
				if ti.Absent != (ti.Data == nil) {
					t.Errorf("tensor %s: Absent %v with %d bytes of data", ti.Name, ti.Absent, len(ti.Data))
				}
				if ti.Absent {
					absent++
				}
			}
			if f.MissingBytes != c.missing || absent != c.absent || f.Complete() != (c.missing == 0) {
				t.Fatalf("missing %d bytes in %d tensors, want %d in %d", f.MissingBytes, absent, c.missing, c.absent)
			}
			if _, err := Open(path); (err != nil) != (c.missing > 0) || (err != nil && !strings.Contains(err.Error(), "cut short")) {
				t.Fatalf("Open of the file cut at %d of %d: %v", c.cut, len(b), err)
			}
		})
	}
}

// TestOpenHeaderOfASplitModelWithACutPart: a split model whose last part is cut after its
// header opens for planning with that part's tensors absent.
func TestOpenHeaderOfASplitModelWithACutPart(t *testing.T) {
	paths := writeSplit(t, t.TempDir(), 3, nil)
	f, err := Open(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	cut := f.Tensors[len(f.Tensors)-2].Offset // part 3's data
	f.Close()
	b, err := os.ReadFile(paths[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[2], b[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHeader(paths[0])
	if err != nil {
		t.Fatalf("OpenHeader of the split model: %v", err)
	}
	defer h.Close()
	if len(h.Parts) != 3 || len(h.Tensors) != 6 || h.MissingBytes != int64(len(b))-int64(cut) || !h.Tensors[5].Absent || h.Tensors[3].Absent {
		t.Fatalf("parts %d, tensors %d, missing %d of %d cut: %+v", len(h.Parts), len(h.Tensors), h.MissingBytes, int64(len(b))-int64(cut), h.Tensors)
	}
	if _, err := Open(paths[0]); !errors.Is(err, ErrTensorRange) {
		t.Fatalf("Open of the split model with a cut part: %v", err)
	}
}

// TestOpenPrefixReadsOnlyTheHeader is OpenHeader where there is no mapping (openPrefix): it reads
// growing prefixes until the header parses, so with a 64-byte first read a header of several
// hundred bytes takes a few reads and no weight; the cut file's missing bytes match the mapped
// reading's, and a header cut short is refused the same way.
func TestOpenPrefixReadsOnlyTheHeader(t *testing.T) {
	defer func(n int) { prefixStart = n }(prefixStart)
	prefixStart = 64
	w := NewWriter()
	w.SetString(KeyArchitecture, "llama")
	w.SetStrings("tokenizer.ggml.tokens", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})
	for _, name := range []string{"a", "b", "c"} {
		if err := w.AddTensorF32(name, quant.F32, []uint64{64, 64}, make([]float32, 64*64)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	whole, err := OpenBytes("whole", b)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		cut     int
		missing int64
	}{
		{"whole", len(b), 0},
		{"cut at the data", int(whole.DataOffset), 3 * 64 * 64 * 4},
	} {
		path := filepath.Join(dir, c.name+".gguf")
		if err := os.WriteFile(path, b[:c.cut], 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := openPrefix(path, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if f.MissingBytes != c.missing || f.Size != int64(c.cut) || len(f.Tensors) != 3 || f.Architecture() != "llama" {
			t.Fatalf("%s: missing %d (want %d), size %d, %d tensors, arch %q", c.name, f.MissingBytes, c.missing, f.Size, len(f.Tensors), f.Architecture())
		}
		for _, ti := range f.Tensors {
			if !ti.Absent || ti.Data != nil {
				t.Fatalf("%s: tensor %s was read (absent %v, %d bytes); the first reads hold only the header", c.name, ti.Name, ti.Absent, len(ti.Data))
			}
		}
	}
	path := filepath.Join(dir, "header-cut.gguf")
	if err := os.WriteFile(path, b[:int(whole.DataOffset)-30], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openPrefix(path, 0); !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "ends inside its header") {
		t.Fatalf("openPrefix of a cut header: %v", err)
	}
}
