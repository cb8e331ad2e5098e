package gguf

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
)

func mustValue(t *testing.T, x any) Value {
	t.Helper()
	v, err := ValueOf(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func writeBytes(t *testing.T, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestWriterRoundTripsEveryValueType(t *testing.T) {
	nested := []Value{
		mustValue(t, []int32{1, -2, 3}),
		mustValue(t, []string{"a", ""}),
		mustValue(t, []Value{mustValue(t, []float64{0.5})}),
		mustValue(t, []uint8{}),
	}
	cases := []struct {
		key  string
		x    any
		typ  ValueType
		elem ValueType
	}{
		{"u8", uint8(200), TypeUint8, 0},
		{"i8", int8(-100), TypeInt8, 0},
		{"u16", uint16(65000), TypeUint16, 0},
		{"i16", int16(-32000), TypeInt16, 0},
		{"u32", uint32(4_000_000_000), TypeUint32, 0},
		{"i32", int32(-2_000_000_000), TypeInt32, 0},
		{"f32", float32(-1.5e-7), TypeFloat32, 0},
		{"bool.true", true, TypeBool, 0},
		{"bool.false", false, TypeBool, 0},
		{"str", "héllo\x00world", TypeString, 0},
		{"str.empty", "", TypeString, 0},
		{"u64", uint64(math.MaxUint64), TypeUint64, 0},
		{"i64", int64(math.MinInt64), TypeInt64, 0},
		{"f64", math.Pi, TypeFloat64, 0},
		{"arr.u8", []uint8{0, 1, 255}, TypeArray, TypeUint8},
		{"arr.i8", []int8{-128, 0, 127}, TypeArray, TypeInt8},
		{"arr.u16", []uint16{1, 65535}, TypeArray, TypeUint16},
		{"arr.i16", []int16{-1, 300}, TypeArray, TypeInt16},
		{"arr.u32", []uint32{7, 1 << 31}, TypeArray, TypeUint32},
		{"arr.i32", []int32{-7, 1 << 30}, TypeArray, TypeInt32},
		{"arr.f32", []float32{1, float32(math.Inf(-1)), 3.25}, TypeArray, TypeFloat32},
		{"arr.bool", []bool{true, false, true}, TypeArray, TypeBool},
		{"arr.str", []string{"▁the", "", "<0x0A>"}, TypeArray, TypeString},
		{"arr.u64", []uint64{0, math.MaxUint64}, TypeArray, TypeUint64},
		{"arr.i64", []int64{math.MinInt64, 5}, TypeArray, TypeInt64},
		{"arr.f64", []float64{-0.25, 1e300}, TypeArray, TypeFloat64},
		{"arr.empty", []float32{}, TypeArray, TypeFloat32},
		{"arr.nested", nested, TypeArray, TypeArray},
	}
	w := NewWriter()
	for _, c := range cases {
		if err := w.Set(c.key, c.x); err != nil {
			t.Fatal(err)
		}
	}
	f, err := OpenBytes("roundtrip.gguf", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 || len(f.KV) != len(cases) {
		t.Fatalf("version %d alignment %d kv %d, want 3, 32, %d", f.Version, f.Alignment, len(f.KV), len(cases))
	}
	for i, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			if f.KV[i].Key != c.key {
				t.Fatalf("KV[%d] is %q, want %q (file order)", i, f.KV[i].Key, c.key)
			}
			v, ok := f.Get(c.key)
			if !ok {
				t.Fatal("missing")
			}
			if v.Type() != c.typ || (c.typ == TypeArray && v.ElemType() != c.elem) {
				t.Fatalf("type %v/%v, want %v/%v", v.Type(), v.ElemType(), c.typ, c.elem)
			}
			if !reflect.DeepEqual(v.Interface(), c.x) {
				t.Fatalf("got %#v, want %#v", v.Interface(), c.x)
			}
		})
	}
}

func TestGettersConvertBetweenIntegerWidthsOnlyWhenTheValueFits(t *testing.T) {
	w := NewWriter()
	w.SetUint32("u32", 7)
	w.SetInt32("neg", -3)
	w.SetUint64("huge", math.MaxUint64)
	w.SetFloat32("f", 0.5)
	w.SetString("s", "x")
	w.SetBool("b", true)
	w.SetStrings("ss", []string{"a", "b"})
	w.SetFloat32s("fs", []float32{1, 2})
	w.SetInt32s("is", []int32{-1, 2})
	w.Set("u8s", []uint8{1, 2, 3})
	w.Set("u64s", []uint64{1, 1 << 40})
	w.Set("f64s", []float64{0.25})
	f, err := OpenBytes("getters.gguf", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any, ok, wantOK bool) {
		t.Helper()
		if ok != wantOK || (ok && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s = %v, %v; want %v, %v", name, got, ok, want, wantOK)
		}
	}
	u, ok := f.Uint("u32")
	check("Uint(u32)", u, uint64(7), ok, true)
	i, ok := f.Int("u32")
	check("Int(u32)", i, int64(7), ok, true)
	u, ok = f.Uint("neg")
	check("Uint(neg)", u, uint64(0), ok, false)
	i, ok = f.Int("neg")
	check("Int(neg)", i, int64(-3), ok, true)
	i, ok = f.Int("huge")
	check("Int(huge)", i, int64(0), ok, false)
	fl, ok := f.Float("f")
	check("Float(f)", fl, 0.5, ok, true)
	fl, ok = f.Float("u32")
	check("Float(u32)", fl, 7.0, ok, true)
	_, ok = f.Float("s")
	check("Float(s)", nil, nil, ok, false)
	s, ok := f.String("s")
	check("String(s)", s, "x", ok, true)
	_, ok = f.String("u32")
	check("String(u32)", nil, nil, ok, false)
	b, ok := f.Bool("b")
	check("Bool(b)", b, true, ok, true)
	_, ok = f.Bool("missing")
	check("Bool(missing)", nil, nil, ok, false)
	ss, ok := f.Strings("ss")
	check("Strings(ss)", ss, []string{"a", "b"}, ok, true)
	fs, ok := f.Float32s("fs")
	check("Float32s(fs)", fs, []float32{1, 2}, ok, true)
	fs, ok = f.Float32s("f64s")
	check("Float32s(f64s)", fs, []float32{0.25}, ok, true)
	is, ok := f.Int32s("is")
	check("Int32s(is)", is, []int32{-1, 2}, ok, true)
	is, ok = f.Int32s("u8s")
	check("Int32s(u8s)", is, []int32{1, 2, 3}, ok, true)
	_, ok = f.Int32s("u64s")
	check("Int32s(u64s) with 1<<40", nil, nil, ok, false)
	_, ok = f.Int32s("fs")
	check("Int32s(fs)", nil, nil, ok, false)
}

func TestWriterReplacesAKeyInPlaceAndDeletes(t *testing.T) {
	w := NewWriter()
	w.SetString("a", "1")
	w.SetString("b", "2")
	w.SetString("c", "3")
	w.SetUint32("a", 9)
	w.Delete("b")
	f, err := OpenBytes("replace.gguf", writeBytes(t, w))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.KV) != 2 || f.KV[0].Key != "a" || f.KV[1].Key != "c" {
		t.Fatalf("keys %v, want [a c]", f.KV)
	}
	if u, ok := f.Uint("a"); !ok || u != 9 {
		t.Errorf("a = %v, %v; want 9", u, ok)
	}
}

// randomTensor returns values for dims from rng, scaled like weights.
func randomTensor(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * 0.1)
	}
	return v
}

func TestWriterRoundTripsTensorsOfSeveralTypesAligned(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []struct {
		typ  quant.Type
		dims []uint64
	}{
		{quant.F32, []uint64{7}},
		{quant.F32, []uint64{3, 5}},
		{quant.F16, []uint64{64, 3}},
		{quant.BF16, []uint64{2, 3, 4}},
		{quant.Q8_0, []uint64{64, 2}},
		{quant.Q4_0, []uint64{32, 3}},
		{quant.Q4_1, []uint64{32, 1, 2}},
		{quant.Q5_0, []uint64{96}},
		{quant.Q5_1, []uint64{32, 2}},
		{quant.Q2_K, []uint64{256, 2}},
		{quant.Q3_K, []uint64{256}},
		{quant.Q4_K, []uint64{512, 1, 1, 2}},
		{quant.Q5_K, []uint64{256, 3}},
		{quant.Q6_K, []uint64{256, 2}},
		// the i-quants and MXFP4: sizes from their block layouts
		{quant.IQ2_XXS, []uint64{256, 2}},
		{quant.IQ2_XS, []uint64{256}},
		{quant.IQ2_S, []uint64{512}},
		{quant.IQ3_XXS, []uint64{256, 3}},
		{quant.IQ3_S, []uint64{256}},
		{quant.IQ1_S, []uint64{256, 2}},
		{quant.IQ1_M, []uint64{256}},
		{quant.IQ4_NL, []uint64{32, 3}},
		{quant.IQ4_XS, []uint64{256, 2}},
		{quant.MXFP4, []uint64{96}},
	}
	for _, align := range []uint32{0, 64, 1} {
		w := NewWriter()
		if align != 0 {
			w.SetUint32(KeyAlignment, align)
		}
		w.SetString(KeyArchitecture, "test")
		want := map[string][]byte{}
		for i, c := range types {
			n, _ := elements(c.dims)
			row, err := c.typ.RowBytes(int(c.dims[0]))
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, row*int(n/int64(c.dims[0])))
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			name := c.typ.String() + "." + string(rune('a'+i))
			if err := w.AddTensor(name, c.typ, c.dims, data); err != nil {
				t.Fatal(err)
			}
			want[name] = data
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "tensors.gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		wantAlign := int(align)
		if align == 0 {
			wantAlign = 32
		}
		if f.Alignment != wantAlign {
			t.Errorf("alignment %d, want %d", f.Alignment, wantAlign)
		}
		if f.DataOffset%int64(wantAlign) != 0 {
			t.Errorf("data section at %d, not aligned to %d", f.DataOffset, wantAlign)
		}
		if len(f.Tensors) != len(types) {
			t.Fatalf("%d tensors, want %d", len(f.Tensors), len(types))
		}
		for i, ti := range f.Tensors {
			c := types[i]
			if ti.Type != c.typ || !reflect.DeepEqual(ti.Dims, c.dims) {
				t.Errorf("%s: %v %v, want %v %v", ti.Name, ti.Type, ti.Dims, c.typ, c.dims)
			}
			if ti.Offset%uint64(wantAlign) != 0 {
				t.Errorf("%s: offset %d not aligned to %d", ti.Name, ti.Offset, wantAlign)
			}
			if !bytes.Equal(ti.Data, want[ti.Name]) {
				t.Errorf("%s: data differs", ti.Name)
			}
			if got, ok := f.Tensor(ti.Name); !ok || got.Name != ti.Name {
				t.Errorf("Tensor(%q) lookup failed", ti.Name)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

func TestAddTensorF32QuantizesAndDequantizesClose(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			dims := []uint64{256, 2}
			vals := randomTensor(rng, 512)
			w := NewWriter()
			if err := w.AddTensorF32("w", typ, dims, vals); err != nil {
				t.Fatal(err)
			}
			f, err := OpenBytes("q.gguf", writeBytes(t, w))
			if err != nil {
				t.Fatal(err)
			}
			ti, _ := f.Tensor("w")
			got := make([]float32, 512)
			if err := quant.Dequantize(ti.Type, ti.Data, got); err != nil {
				t.Fatal(err)
			}
			var maxErr float64
			for i := range vals {
				maxErr = max(maxErr, math.Abs(float64(got[i]-vals[i])))
			}
			if maxErr > 0.05 {
				t.Errorf("max abs error %g after %v round trip, want ≤ 0.05", maxErr, typ)
			}
		})
	}
}

func TestWriterRejectsBadTensors(t *testing.T) {
	cases := []struct {
		name string
		add  func(w *Writer) error
	}{
		{"empty name", func(w *Writer) error { return w.AddTensor("", quant.F32, []uint64{1}, make([]byte, 4)) }},
		{"duplicate name", func(w *Writer) error {
			w.AddTensor("a", quant.F32, []uint64{1}, make([]byte, 4))
			return w.AddTensor("a", quant.F32, []uint64{1}, make([]byte, 4))
		}},
		{"unknown type", func(w *Writer) error { return w.AddTensor("a", quant.Type(99), []uint64{1}, make([]byte, 4)) }},
		{"no dims", func(w *Writer) error { return w.AddTensor("a", quant.F32, nil, nil) }},
		{"five dims", func(w *Writer) error { return w.AddTensor("a", quant.F32, []uint64{1, 1, 1, 1, 1}, make([]byte, 4)) }},
		{"zero dim", func(w *Writer) error { return w.AddTensor("a", quant.F32, []uint64{1, 0}, nil) }},
		{"row not a block multiple", func(w *Writer) error { return w.AddTensor("a", quant.Q8_0, []uint64{16}, make([]byte, 34)) }},
		{"wrong data size", func(w *Writer) error { return w.AddTensor("a", quant.F32, []uint64{4}, make([]byte, 15)) }},
		{"wrong value count", func(w *Writer) error { return w.AddTensorF32("a", quant.F32, []uint64{4}, make([]float32, 3)) }},
		{"bad alignment", func(w *Writer) error {
			w.SetUint32(KeyAlignment, 48)
			_, err := w.WriteTo(&bytes.Buffer{})
			return err
		}},
		{"bad Set type", func(w *Writer) error { return w.Set("k", []int{1}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.add(NewWriter()); err == nil {
				t.Fatal("no error")
			} else {
				t.Log(err)
			}
		})
	}
}
