package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// A header-only file is the whole file's first DataOffset bytes: the same metadata and tensor
// infos (offsets included), and OpenHeader counts the data it lacks.
func TestWriteHeaderToIsTheWholeFilesPrefix(t *testing.T) {
	tensors := []struct {
		name string
		typ  quant.Type
		dims []uint64
	}{
		{"a", quant.F32, []uint64{7}},
		{"b", quant.Q8_0, []uint64{64, 3}},
		{"c", quant.IQ2_XXS, []uint64{256, 2, 2}},
		{"d", quant.Q6_K, []uint64{256}},
	}
	whole, header := NewWriter(), NewWriter()
	var dataBytes int64
	for _, w := range []*Writer{whole, header} {
		w.SetString(KeyArchitecture, "test")
		w.SetUint32(KeyAlignment, 64)
	}
	for _, tc := range tensors {
		n := int64(1)
		for _, d := range tc.dims {
			n *= int64(d)
		}
		row, err := tc.typ.RowBytes(int(tc.dims[0]))
		if err != nil {
			t.Fatal(err)
		}
		size := int64(row) * n / int64(tc.dims[0])
		dataBytes += size
		if err := whole.AddTensor(tc.name, tc.typ, tc.dims, bytes.Repeat([]byte{7}, int(size))); err != nil {
			t.Fatal(err)
		}
		if err := header.AddTensorShape(tc.name, tc.typ, tc.dims); err != nil {
			t.Fatal(err)
		}
	}
	full := writeBytes(t, whole)
	var buf bytes.Buffer
	if _, err := header.WriteHeaderTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := OpenBytes("whole.gguf", full)
	if err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != f.DataOffset || !bytes.Equal(buf.Bytes(), full[:f.DataOffset]) {
		t.Fatalf("header-only file of %d bytes is not the whole file's first %d", buf.Len(), f.DataOffset)
	}
	path := filepath.Join(t.TempDir(), "header.gguf")
	if err := header.WriteHeaderFile(path); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHeader(path)
	if err != nil {
		t.Fatalf("open the header-only file: %v", err)
	}
	defer h.Close()
	if h.Complete() || h.MissingBytes < dataBytes || len(h.Tensors) != len(tensors) {
		t.Fatalf("header-only file: complete %v, missing %d bytes (data %d), %d tensors", h.Complete(), h.MissingBytes, dataBytes, len(h.Tensors))
	}
	for i, ti := range h.Tensors {
		if ti.Offset != f.Tensors[i].Offset || ti.Type != f.Tensors[i].Type {
			t.Fatalf("tensor %s at %d as %v, the whole file has it at %d as %v", ti.Name, ti.Offset, ti.Type, f.Tensors[i].Offset, f.Tensors[i].Type)
		}
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

// WriteTo refuses a writer holding a tensor without data rather than writing a short file.
func TestWriteToRefusesATensorWithoutData(t *testing.T) {
	w := NewWriter()
	w.SetString(KeyArchitecture, "test")
	if err := w.AddTensorShape("x", quant.Q8_0, []uint64{32, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `"x"`) || !strings.Contains(err.Error(), "WriteHeaderTo") {
		t.Fatalf("WriteTo of a shape-only tensor: err %v, want one naming the tensor and WriteHeaderTo", err)
	}
	if err := w.AddTensorShape("y", quant.Q8_0, []uint64{33}); err == nil { // negative control: the checks still apply
		t.Fatal("AddTensorShape accepted a row of 33 for Q8_0")
	}
}
