package gguf

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// raw assembles GGUF bytes field by field, so tests can build files the Writer refuses to make.
type raw struct{ b []byte }

func (r *raw) u8(v uint8) *raw   { r.b = append(r.b, v); return r }
func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) str(s string) *raw { return r.u64(uint64(len(s))).bytes([]byte(s)) }
func (r *raw) bytes(p []byte) *raw {
	r.b = append(r.b, p...)
	return r
}

// pad appends zeros up to a multiple of align, then n more zero bytes of tensor data.
func (r *raw) data(align, n int) *raw {
	for len(r.b)%align != 0 {
		r.b = append(r.b, 0)
	}
	r.b = append(r.b, make([]byte, n)...)
	return r
}

func head(version uint32, tensors, kvs uint64) *raw {
	return (&raw{}).bytes([]byte("GGUF")).u32(version).u64(tensors).u64(kvs)
}

// kv appends a key with a uint32 value.
func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(uint32(TypeUint32)).u32(v) }

// tensor appends a tensor info.
func (r *raw) tensor(name string, typ uint32, off uint64, dims ...uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(typ).u64(off)
}

const hdr = 24 // magic, version, tensor count, metadata count

func TestBadFilesFailWithAClearError(t *testing.T) {
	const f32, q8 = 0, 8
	// Offsets of the first tensor info after a header with no metadata.
	cases := []struct {
		name   string
		data   []byte
		is     error  // sentinel the error must match, or nil
		offset int64  // expected FormatError.Offset
		tensor string // expected FormatError.Tensor
		msg    string // substring of the message
	}{
		{"empty file", nil, ErrNotGGUF, -1, "", "not a GGUF file: the file is empty"},
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), ErrNotGGUF, -1, "", `not a GGUF file (a GGUF model starts with the bytes "GGUF")`},
		{"old GGJT model", []byte("tjgg\x03\x00\x00\x00"), ErrNotGGUF, -1, "", "older GGML/GGJT model; convert it"},
		{"truncated version", []byte("GGUF\x03\x00"), ErrTruncated, 4, "", "version needs 4 bytes, the file has 2 left"},
		{"version 1", head(1, 0, 0).b, ErrVersion, 4, "", "version 1 is not supported"},
		{"version 4", head(4, 0, 0).b, ErrVersion, 4, "", "version 4 is not supported (expected 2 or 3)"},
		{"version 0", head(0, 0, 0).b, ErrVersion, 4, "", "version 0 is not supported"},
		{"big-endian", head(3<<24, 0, 0).b, ErrVersion, 4, "", "big-endian"},
		{"truncated counts", head(3, 0, 0).b[:20], ErrTruncated, 16, "", "metadata count needs 8 bytes"},
		{"absurd metadata count", head(3, 0, 1<<60).b, ErrTruncated, 16, "", "metadata count 1152921504606846976 cannot fit"},
		{"absurd tensor count", head(3, math.MaxUint64, 0).b, ErrTruncated, 8, "", "tensor count 18446744073709551615 cannot fit"},
		{"absurd key length", head(3, 0, 1).u64(1 << 62).u32(0).u8(0).b, ErrTruncated, hdr, "", "key of metadata entry 0 length 4611686018427387904 exceeds the 5 bytes left"},
		{"unknown value type", head(3, 0, 1).str("k").u32(13).u32(0).b, nil, hdr + 13, "", `"k": unknown value type 13, expected 0..12`},
		{"truncated value", head(3, 0, 1).str("k").u32(uint32(TypeUint64)).u32(0).b, ErrTruncated, hdr + 13, "", `"k" needs 8 bytes, the file has 4 left`},
		{"absurd string value", head(3, 0, 1).str("k").u32(uint32(TypeString)).u64(1000).str("xy").b, ErrTruncated, hdr + 13, "", `"k" length 1000 exceeds the 10 bytes left`},
		{"absurd array length", head(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 40).u64(0).b, ErrTruncated, hdr + 17, "",
			`"k": array of 1099511627776 string needs at least 8796093022208 bytes, the file has 8 left`},
		{"array of bools longer than the file", head(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeBool)).u64(9).u64(0).b, ErrTruncated, hdr + 17, "", "array of 9 bool"},
		{"unknown array element type", head(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(77).u64(0).b, nil, hdr + 13, "", "unknown array element type 77"},
		{"truncated string in array", head(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("a").u64(50).b, ErrTruncated, hdr + 13 + 4 + 8 + 9, "", `"k"[1] length 50 exceeds`},
		{"arrays nested too deep", func() []byte {
			r := head(3, 0, 1).str("k").u32(uint32(TypeArray))
			for range 20 {
				r.u32(uint32(TypeArray)).u64(1)
			}
			return r.u32(uint32(TypeUint8)).u64(0).b
		}(), nil, -2, "", "nested deeper than 16"},
		{"duplicate key", head(3, 0, 2).kvU32("k", 1).kvU32("k", 2).b, nil, hdr + 17, "", `duplicate metadata key "k"`},
		{"alignment not a power of two", head(3, 0, 1).kvU32(KeyAlignment, 48).b, nil, -1, "", "general.alignment is 48, expected a power of two"},
		{"alignment zero", head(3, 0, 1).kvU32(KeyAlignment, 0).b, nil, -1, "", "general.alignment is 0"},
		{"alignment a string", head(3, 0, 1).str(KeyAlignment).u32(uint32(TypeString)).str("32").b, nil, -1, "", `general.alignment is "32"`},
		{"empty tensor name", head(3, 1, 0).tensor("", f32, 0, 1).data(32, 4).b, nil, hdr, "", "tensor 0 has an empty name"},
		{"five dimensions", head(3, 1, 0).tensor("t", f32, 0, 1, 1, 1, 1, 1).data(32, 4).b, nil, hdr + 9, "t", "5 dimensions, expected 1 to 4"},
		{"zero dimensions", head(3, 1, 0).tensor("t", f32, 0).data(32, 4).b, nil, hdr + 9, "t", "0 dimensions, expected 1 to 4"},
		{"zero-length dimension", head(3, 1, 0).tensor("t", f32, 0, 4, 0).data(32, 4).b, nil, hdr + 21, "t", "dimension 1 is 0, expected 1 to"},
		{"negative dimension", head(3, 1, 0).tensor("t", f32, 0, 1<<63).data(32, 4).b, nil, hdr + 13, "t", "dimension 0 is 9223372036854775808"},
		{"dims overflow", head(3, 1, 0).tensor("t", f32, 0, 1<<40, 1<<40).data(32, 4).b, nil, hdr + 21, "t", "overflow"},
		{"bytes overflow", head(3, 1, 0).tensor("t", f32, 0, 1<<31, 1<<31).data(32, 4).b, nil, hdr, "t", "take more than"},
		{"unknown tensor type", head(3, 1, 0).tensor("t", 99, 0, 4).data(32, 16).b, ErrTensorType, hdr + 21, "t", "unknown tensor type 99"},
		{"removed tensor type Q4_2", head(3, 1, 0).tensor("t", 4, 0, 32).data(32, 32).b, ErrTensorType, hdr + 21, "t", "unknown tensor type 4"},
		{"TQ1_0 is refused naming what is supported", head(3, 1, 0).tensor("t", 34, 0, 256).data(32, 64).b, ErrTensorType, hdr + 21, "t", "unknown tensor type 34, expected a GGML type id this build knows (F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M, BF16, MXFP4)"},
		{"row not a block multiple", head(3, 1, 0).tensor("t", q8, 0, 16, 2).data(32, 68).b, nil, hdr, "t", "row length 16 is not a multiple of the Q8_0 block size 32"},
		{"tensor count beyond a short file", head(3, 1, 0).str("t").u32(2).u64(4).b, ErrTruncated, 8, "", "tensor count 1 cannot fit in the 21 bytes left"},
		{"truncated tensor info", head(3, 2, 0).tensor("a-long-tensor-name-x", f32, 0, 4).str("t2").u32(2).u64(4).b, ErrTruncated, hdr + 52 + 22, "", "dimensions of tensor t2 needs 8 bytes, the file has 0 left"},
		{"misaligned offset", head(3, 2, 0).tensor("a", f32, 0, 4).tensor("b", f32, 16, 4).data(32, 64).b, nil, hdr + 33, "b", "data offset 16 is not a multiple of the alignment 32"},
		{"data past EOF", head(3, 1, 0).tensor("t", f32, 0, 8).data(32, 31).b, ErrTensorRange, hdr, "t", "runs past the end of the file: expected it within 96 bytes, the file has 95"},
		{"offset past EOF", head(3, 1, 0).tensor("t", f32, 1<<20, 8).data(32, 32).b, ErrTensorRange, hdr, "t", "at offset 1048576 in the data section"},
		{"offset wraps around", head(3, 1, 0).tensor("t", f32, math.MaxUint64-31, 8).data(32, 32).b, ErrTensorRange, hdr, "t", "runs past the end"},
		{"overlapping tensors", head(3, 2, 0).tensor("a", f32, 0, 16).tensor("b", f32, 32, 16).data(32, 96).b, ErrTensorRange, 128, "b", `data [128, 192) overlaps tensor "a" at [96, 160)`},
		{"tensors at the same offset", head(3, 2, 0).tensor("a", f32, 0, 8).tensor("b", f32, 0, 8).data(32, 32).b, ErrTensorRange, 96, "b", `data [96, 128) overlaps tensor "a" at [96, 128)`},
		{"duplicate tensor", head(3, 2, 0).tensor("a", f32, 0, 8).tensor("a", f32, 32, 8).data(32, 64).b, nil, hdr + 33, "a", "duplicate tensor name"},
		{"split part through OpenBytes", head(3, 0, 1).str(KeySplitCount).u32(uint32(TypeUint16)).bytes([]byte{2, 0}).b, nil, -1, "", "open the first part's file with Open"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := OpenBytes("bad.gguf", c.data)
			if err == nil {
				t.Fatalf("opened with %d tensors, want an error", len(f.Tensors))
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v does not match %v", err, c.is)
			}
			if fe.File != "bad.gguf" || !strings.Contains(err.Error(), "bad.gguf") {
				t.Errorf("error %q does not name the file", err)
			}
			if c.offset != -2 && fe.Offset != c.offset {
				t.Errorf("offset %d, want %d (%v)", fe.Offset, c.offset, err)
			}
			if fe.Tensor != c.tensor {
				t.Errorf("tensor %q, want %q (%v)", fe.Tensor, c.tensor, err)
			}
			if !saysARemedy(err.Error()) {
				t.Errorf("error %q says nothing the user can do", err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not contain %q", err, c.msg)
			}
		})
	}
}

func TestValidBaselineOfTheBadFileCasesOpens(t *testing.T) {
	// The negative control: the same construction with consistent fields opens.
	data := head(2, 2, 1).kvU32(KeyAlignment, 64).tensor("a", 8, 0, 32, 2).tensor("b", 0, 128, 3).data(64, 128+12).b
	f, err := OpenBytes("good.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || f.Alignment != 64 || len(f.Tensors) != 2 {
		t.Fatalf("version %d alignment %d tensors %d", f.Version, f.Alignment, len(f.Tensors))
	}
	if a, _ := f.Tensor("a"); a.Size != 68 || a.Offset != uint64(f.DataOffset) {
		t.Errorf("a: size %d offset %d, want 68 at %d", a.Size, a.Offset, f.DataOffset)
	}
	if b, _ := f.Tensor("b"); b.Size != 12 || b.Offset != uint64(f.DataOffset)+128 || b.Elements() != 3 {
		t.Errorf("b: size %d offset %d elements %d", b.Size, b.Offset, b.Elements())
	}
}

func TestEveryTruncationOfAValidFileFails(t *testing.T) {
	w := NewWriter()
	w.SetString(KeyArchitecture, "llama")
	w.SetStrings("tokenizer.ggml.tokens", []string{"<unk>", "a", "bc"})
	w.Set("nested", []Value{mustValue(t, []int16{1, 2})})
	w.AddTensor("x", 0, []uint64{3}, make([]byte, 12))
	w.AddTensor("y", 1, []uint64{2, 2}, make([]byte, 8))
	data := writeBytes(t, w)
	full, err := OpenBytes("full.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	last := full.Tensors[len(full.Tensors)-1]
	end := int(last.Offset) + int(last.Size) // only the final padding may be cut
	for n := 0; n < end; n++ {
		if _, err := OpenBytes("cut.gguf", data[:n]); err == nil {
			t.Fatalf("a file cut to %d of %d bytes opened", n, len(data))
		}
	}
	if _, err := OpenBytes("cut.gguf", data[:end]); err != nil {
		t.Errorf("cutting only the trailing padding: %v", err)
	}
}

func TestOpenReportsMissingAndNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "nope.gguf"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
	if _, err := Open(dir); err == nil {
		t.Error("opening a directory succeeded")
	}
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); !errors.Is(err, ErrNotGGUF) || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty file: %v, want ErrNotGGUF naming the path", err)
	}
}

func TestHugeCountsAreRefusedBeforeAllocating(t *testing.T) {
	cases := map[string][]byte{
		"uint8 array of 2^56":  head(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(1 << 56).b,
		"string array of 2^40": head(3, 0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 40).b,
		"2^40 keys":            head(3, 0, 1<<40).b,
		"2^40 tensors":         head(3, 1<<40, 0).b,
	}
	for name, data := range cases {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := OpenBytes("big.gguf", data)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: error %v, want ErrTruncated", name, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("%s: %d bytes allocated for a %d-byte file", name, grew, len(data))
		}
	}
}

// saysARemedy reports whether a format error's text tells the user what to do about the file.
func saysARemedy(msg string) bool {
	for _, r := range []string{"download", "convert", "choose", "open the first part", "quantize", "use a little-endian"} {
		if strings.Contains(msg, r) {
			return true
		}
	}
	return false
}
