package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

// writeSplit writes a model in n parts named like gguf-split does, two tensors per part, and
// returns the part paths. edit may change part k's writer before it is written.
func writeSplit(t *testing.T, dir string, n int, edit func(k int, w *Writer)) []string {
	t.Helper()
	var paths []string
	for k := range n {
		w := NewWriter()
		if k == 0 {
			w.SetString(KeyArchitecture, "llama")
			w.SetUint32("llama.block_count", uint32(n))
		}
		w.Set(KeySplitNo, uint16(k))
		w.Set(KeySplitCount, uint16(n))
		w.SetInt32(KeySplitTensors, int32(2*n))
		for j := range 2 {
			name := fmt.Sprintf("blk.%d.w%d", k, j)
			vals := make([]float32, 8*(k+1))
			for i := range vals {
				vals[i] = float32(100*k + 10*j + i)
			}
			if err := w.AddTensorF32(name, quant.F32, []uint64{8, uint64(k + 1)}, vals); err != nil {
				t.Fatal(err)
			}
		}
		if edit != nil {
			edit(k, w)
		}
		p := filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.gguf", k+1, n))
		if err := w.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func TestOpeningAnyPartOfASplitModelMergesAllParts(t *testing.T) {
	paths := writeSplit(t, t.TempDir(), 3, nil)
	for _, open := range paths {
		t.Run(filepath.Base(open), func(t *testing.T) {
			f, err := Open(open)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Path != paths[0] || len(f.Parts) != 3 || f.Parts[2] != paths[2] {
				t.Errorf("Path %s Parts %v, want the first part and all three", f.Path, f.Parts)
			}
			if f.Architecture() != "llama" {
				t.Errorf("metadata not from the first part: architecture %q", f.Architecture())
			}
			if len(f.Tensors) != 6 {
				t.Fatalf("%d tensors, want 6", len(f.Tensors))
			}
			var size int64
			for _, p := range paths {
				st, _ := os.Stat(p)
				size += st.Size()
			}
			if f.Size != size {
				t.Errorf("Size %d, want %d", f.Size, size)
			}
			for i, ti := range f.Tensors {
				k, j := i/2, i%2
				if want := fmt.Sprintf("blk.%d.w%d", k, j); ti.Name != want || ti.Split != k {
					t.Errorf("tensor %d is %s in part %d, want %s in part %d", i, ti.Name, ti.Split, want, k)
				}
				got := make([]float32, ti.Elements())
				if err := quant.Dequantize(ti.Type, ti.Data, got); err != nil {
					t.Fatal(err)
				}
				if got[3] != float32(100*k+10*j+3) {
					t.Errorf("%s[3] = %v, want %d: Data points into the wrong part", ti.Name, got[3], 100*k+10*j+3)
				}
			}
			if ti, ok := f.Tensor("blk.2.w1"); !ok || ti.Split != 2 {
				t.Errorf("Tensor(blk.2.w1) = %v, %v", ti, ok)
			}
		})
	}
}

func TestBrokenSplitModelsFailNamingThePart(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(k int, w *Writer)
		after  func(paths []string)
		is     error
		errHas string
	}{
		{name: "missing part", after: func(p []string) { os.Remove(p[2]) }, is: os.ErrNotExist, errHas: "model-00003-of-00003.gguf"},
		{name: "part with the wrong number", edit: func(k int, w *Writer) {
			if k == 1 {
				w.Set(KeySplitNo, uint16(2))
			}
		}, errHas: "split.no is 2, expected 1 for part 2 of 3"},
		{name: "part with another count", edit: func(k int, w *Writer) {
			if k == 2 {
				w.Set(KeySplitCount, uint16(4))
			}
		}, errHas: "split.count is 4, expected 3 like the first part"},
		{name: "tensor in two parts", edit: func(k int, w *Writer) {
			if k == 2 {
				w.AddTensor("blk.0.w0", quant.F32, []uint64{1}, make([]byte, 4))
			}
		}, errHas: `tensor "blk.0.w0": tensor also present in an earlier part`},
		{name: "tensor count disagrees", edit: func(k int, w *Writer) {
			if k == 0 {
				w.SetInt32(KeySplitTensors, 7)
			}
		}, errHas: "split.tensors.count is 7 but the 3 parts hold 6 tensors"},
		{name: "corrupt part", after: func(p []string) {
			b, _ := os.ReadFile(p[1])
			os.WriteFile(p[1], b[:len(b)-4], 0o644)
		}, is: ErrTensorRange, errHas: "model-00002-of-00003.gguf"},
		{name: "count but no split name", after: func(p []string) {
			os.Rename(p[0], filepath.Join(filepath.Dir(p[0]), "renamed.gguf"))
		}, errHas: "does not follow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			paths := writeSplit(t, dir, 3, c.edit)
			if c.after != nil {
				c.after(paths)
			}
			first := paths[0]
			if _, err := os.Stat(first); err != nil {
				first = filepath.Join(dir, "renamed.gguf")
			}
			f, err := Open(first)
			if err == nil {
				f.Close()
				t.Fatal("opened, want an error")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v does not match %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("error %q does not contain %q", err, c.errHas)
			}
		})
	}
}

func TestSingleFileWithSplitCountOneOpensAlone(t *testing.T) {
	w := NewWriter()
	w.Set(KeySplitCount, uint16(1))
	w.AddTensor("a", quant.F32, []uint64{1}, make([]byte, 4))
	p := filepath.Join(t.TempDir(), "solo-00001-of-00001.gguf")
	if err := w.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Parts) != 1 || len(f.Tensors) != 1 {
		t.Errorf("parts %v tensors %d", f.Parts, len(f.Tensors))
	}
	var buf bytes.Buffer
	w.WriteTo(&buf)
	if _, err := OpenBytes("solo", buf.Bytes()); err != nil {
		t.Errorf("OpenBytes of a one-part split: %v", err)
	}
}
