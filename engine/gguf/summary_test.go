package gguf

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/vkllm/vkllm/engine/quant"
)

func TestValueStringShowsTypeAndAtMostEightElements(t *testing.T) {
	cases := []struct {
		x    any
		want string
	}{
		{uint32(7), "7"},
		{"a\"b", `"a\"b"`},
		{strings.Repeat("x", 100), `"` + strings.Repeat("x", 80) + `"…`},
		{[]int32{1, 2, 3}, "[3]int32{1, 2, 3}"},
		{[]uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, "[10]uint8{1, 2, 3, 4, 5, 6, 7, 8, …}"},
		{[]string{"a"}, `[1]string{"a"}`},
		{[]Value{mustValueTB(t, []bool{true})}, "[1]array{[1]bool{true}}"},
	}
	for _, c := range cases {
		if got := mustValue(t, c.x).String(); got != c.want {
			t.Errorf("String of %v = %s, want %s", c.x, got, c.want)
		}
	}
	if got := (Value{}).String(); got != "<invalid>" {
		t.Errorf("zero Value renders %q", got)
	}
	if ValueType(13).String() != "type(13)" || TypeFloat64.String() != "float64" {
		t.Errorf("ValueType names: %v %v", ValueType(13), TypeFloat64)
	}
}

func TestNestedArrayAccessors(t *testing.T) {
	inner := mustValue(t, []int16{5, -6})
	v := mustValue(t, []Value{inner})
	a, ok := v.AsArray()
	if !ok || len(a) != 1 || v.Len() != 1 {
		t.Fatalf("AsArray = %v, %v", a, ok)
	}
	if got, ok := a[0].AsInt32s(); !ok || got[1] != -6 {
		t.Errorf("inner AsInt32s = %v, %v", got, ok)
	}
	if x, ok := v.Index(0).Index(1).AsInt(); !ok || x != -6 {
		t.Errorf("Index(0).Index(1) = %v, %v", x, ok)
	}
	if v.Index(5).Type() != 0 || v.Index(5).Interface() != nil {
		t.Error("out-of-range Index is not the zero Value")
	}
	if _, err := ValueOf([]Value{mustValue(t, uint8(1))}); err == nil {
		t.Error("ValueOf accepted an array of scalars as []Value")
	}
	if _, err := ValueOf(Value{}); err == nil {
		t.Error("ValueOf accepted the zero Value")
	}
}

func TestSummaryNamesArchitectureCountsTypesAndSize(t *testing.T) {
	w := NewWriter()
	w.SetString(KeyArchitecture, "qwen2")
	w.AddTensorF32("a", quant.Q8_0, []uint64{32, 4}, make([]float32, 128))
	w.AddTensorF32("b", quant.F32, []uint64{2000}, make([]float32, 2000))
	w.AddTensorF32("c", quant.F32, []uint64{10}, make([]float32, 10))
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenBytes("dir/m.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	if f.ParamCount() != 2138 {
		t.Errorf("ParamCount %d, want 2138", f.ParamCount())
	}
	if a, _ := f.Tensor("a"); a.Rows() != 4 {
		t.Errorf("Rows %d, want 4", a.Rows())
	}
	want := "m.gguf: GGUF v3 qwen2, 2.1K params in 3 tensors (F32 2, Q8_0 1), 8.2 KiB" // 192 header bytes + 160 + 8000 + 64 data = 8416
	if got := f.Summary(); got != want {
		t.Errorf("Summary\n got %s\nwant %s", got, want)
	}
	if _, ok := f.Tensor("missing"); ok {
		t.Error("Tensor(missing) found")
	}
}

func TestWriterReportsAZeroValueAtWrite(t *testing.T) {
	w := NewWriter()
	w.SetValue("k", Value{})
	if _, err := w.Bytes(); err == nil || !strings.Contains(err.Error(), `"k"`) {
		t.Errorf("error %v, want one naming the key", err)
	}
}

func TestTensorDataIsAlignedInMemoryEvenFromAnOddBuffer(t *testing.T) {
	w := NewWriter()
	w.AddTensorF32("a", quant.F32, []uint64{3}, []float32{1, 2, 3})
	w.AddTensorF32("b", quant.F16, []uint64{5}, make([]float32, 5))
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	odd := append(make([]byte, 1, len(data)+1), data...)[1:]
	f, err := OpenBytes("odd.gguf", odd)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.Tensors {
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(ti.Data))); p%32 != 0 {
			t.Errorf("%s data at address %#x, not 32-byte aligned", ti.Name, p)
		}
	}
	a, _ := f.Tensor("a")
	if got := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(a.Data))), 3); got[2] != 3 {
		t.Errorf("a = %v", got)
	}
}
