package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/vkllm/vkllm/engine/quant"
)

const (
	magic            = "GGUF"
	defaultAlignment = 32
	maxDims          = 4  // GGML_MAX_DIMS
	maxArrayDepth    = 16 // arrays of arrays deeper than this are refused
	maxAlignment     = 1 << 30
)

// decoder reads little-endian GGUF fields from b, never past its end, and never allocates more
// than the bytes that remain could describe.
type decoder struct {
	file string
	b    []byte
	off  uint64
}

func (d *decoder) left() uint64 { return uint64(len(d.b)) - d.off }

func (d *decoder) errAt(off uint64, err error, format string, args ...any) *FormatError {
	if err == nil {
		err = ErrMalformed
	}
	return &FormatError{File: d.file, Offset: int64(off), Msg: fmt.Sprintf(format, args...), Err: err}
}

func (d *decoder) need(n uint64, what string) error {
	if n > d.left() {
		return d.errAt(d.off, ErrTruncated, "truncated: %s needs %d bytes, the file has %d left", what, n, d.left())
	}
	return nil
}

func (d *decoder) u8(what string) (uint8, error) {
	if err := d.need(1, what); err != nil {
		return 0, err
	}
	v := d.b[d.off]
	d.off++
	return v, nil
}

func (d *decoder) u16(what string) (uint16, error) {
	if err := d.need(2, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint16(d.b[d.off:])
	d.off += 2
	return v, nil
}

func (d *decoder) u32(what string) (uint32, error) {
	if err := d.need(4, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v, nil
}

func (d *decoder) u64(what string) (uint64, error) {
	if err := d.need(8, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v, nil
}

func (d *decoder) str(what string) (string, error) {
	start := d.off
	n, err := d.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > d.left() {
		return "", d.errAt(start, ErrTruncated, "%s length %d exceeds the %d bytes left in the file", what, n, d.left())
	}
	s := string(d.b[d.off : d.off+n])
	d.off += n
	return s, nil
}

// value reads a value of type t; what names it for errors (the key).
func (d *decoder) value(t ValueType, depth int, what string) (Value, error) {
	start := d.off
	switch t {
	case TypeUint8:
		x, err := d.u8(what)
		return Value{typ: t, x: x}, err
	case TypeInt8:
		x, err := d.u8(what)
		return Value{typ: t, x: int8(x)}, err
	case TypeBool:
		x, err := d.u8(what)
		return Value{typ: t, x: x != 0}, err
	case TypeUint16:
		x, err := d.u16(what)
		return Value{typ: t, x: x}, err
	case TypeInt16:
		x, err := d.u16(what)
		return Value{typ: t, x: int16(x)}, err
	case TypeUint32:
		x, err := d.u32(what)
		return Value{typ: t, x: x}, err
	case TypeInt32:
		x, err := d.u32(what)
		return Value{typ: t, x: int32(x)}, err
	case TypeFloat32:
		x, err := d.u32(what)
		return Value{typ: t, x: math.Float32frombits(x)}, err
	case TypeUint64:
		x, err := d.u64(what)
		return Value{typ: t, x: x}, err
	case TypeInt64:
		x, err := d.u64(what)
		return Value{typ: t, x: int64(x)}, err
	case TypeFloat64:
		x, err := d.u64(what)
		return Value{typ: t, x: math.Float64frombits(x)}, err
	case TypeString:
		s, err := d.str(what)
		return Value{typ: t, x: s}, err
	case TypeArray:
		if depth >= maxArrayDepth {
			return Value{}, d.errAt(start, nil, "%s: arrays nested deeper than %d levels", what, maxArrayDepth)
		}
		et, err := d.u32(what + " element type")
		if err != nil {
			return Value{}, err
		}
		elem := ValueType(et)
		if !elem.Valid() {
			return Value{}, d.errAt(start, nil, "%s: unknown array element type %d, expected 0..12", what, et)
		}
		n, err := d.u64(what + " array length")
		if err != nil {
			return Value{}, err
		}
		if n > d.left()/elem.minSize() {
			return Value{}, d.errAt(start+4, ErrTruncated, "%s: array of %d %v needs at least %d bytes, the file has %d left",
				what, n, elem, satMul(n, elem.minSize()), d.left())
		}
		return d.array(elem, int(n), depth, what)
	}
	return Value{}, d.errAt(start, nil, "%s: unknown value type %d, expected 0..12", what, uint32(t))
}

func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// array reads n elements of type elem; the caller has checked that n elements can fit.
func (d *decoder) array(elem ValueType, n, depth int, what string) (Value, error) {
	le := binary.LittleEndian
	p := d.b[d.off:]
	fixed := func(size int) { d.off += uint64(n * size) }
	var x any
	switch elem {
	case TypeUint8:
		a := make([]uint8, n)
		copy(a, p)
		x = a
		fixed(1)
	case TypeInt8:
		a := make([]int8, n)
		for i := range a {
			a[i] = int8(p[i])
		}
		x = a
		fixed(1)
	case TypeBool:
		a := make([]bool, n)
		for i := range a {
			a[i] = p[i] != 0
		}
		x = a
		fixed(1)
	case TypeUint16:
		a := make([]uint16, n)
		for i := range a {
			a[i] = le.Uint16(p[2*i:])
		}
		x = a
		fixed(2)
	case TypeInt16:
		a := make([]int16, n)
		for i := range a {
			a[i] = int16(le.Uint16(p[2*i:]))
		}
		x = a
		fixed(2)
	case TypeUint32:
		a := make([]uint32, n)
		for i := range a {
			a[i] = le.Uint32(p[4*i:])
		}
		x = a
		fixed(4)
	case TypeInt32:
		a := make([]int32, n)
		for i := range a {
			a[i] = int32(le.Uint32(p[4*i:]))
		}
		x = a
		fixed(4)
	case TypeFloat32:
		a := make([]float32, n)
		for i := range a {
			a[i] = math.Float32frombits(le.Uint32(p[4*i:]))
		}
		x = a
		fixed(4)
	case TypeUint64:
		a := make([]uint64, n)
		for i := range a {
			a[i] = le.Uint64(p[8*i:])
		}
		x = a
		fixed(8)
	case TypeInt64:
		a := make([]int64, n)
		for i := range a {
			a[i] = int64(le.Uint64(p[8*i:]))
		}
		x = a
		fixed(8)
	case TypeFloat64:
		a := make([]float64, n)
		for i := range a {
			a[i] = math.Float64frombits(le.Uint64(p[8*i:]))
		}
		x = a
		fixed(8)
	case TypeString:
		a := make([]string, n)
		for i := range a {
			// Fast path without formatting a name; on failure reread for the error message.
			if d.left() >= 8 {
				if n := binary.LittleEndian.Uint64(d.b[d.off:]); n <= d.left()-8 {
					a[i] = string(d.b[d.off+8 : d.off+8+n])
					d.off += 8 + n
					continue
				}
			}
			_, err := d.str(fmt.Sprintf("%s[%d]", what, i))
			return Value{}, err
		}
		x = a
	case TypeArray:
		a := make([]Value, n)
		for i := range a {
			v, err := d.value(TypeArray, depth+1, fmt.Sprintf("%s[%d]", what, i))
			if err != nil {
				return Value{}, err
			}
			a[i] = v
		}
		x = a
	}
	return Value{typ: TypeArray, elem: elem, x: x}, nil
}

// parse decodes one GGUF file held in b. Tensor data is not copied: each TensorInfo.Data is a
// view into b. split is recorded in each TensorInfo.Split. With headerOnly, tensor data that runs
// past the end of b is marked Absent instead of refused (OpenHeader); the header itself must be
// whole either way.
func parse(name string, b []byte, split int, headerOnly bool) (*File, error) {
	return parseSized(name, b, split, headerOnly, int64(len(b)))
}

// parseSized is parse of the first len(b) bytes of a file of size bytes (headerOnly when b is a
// prefix): tensors past b are Absent, and only what lies past size counts as missing.
func parseSized(name string, b []byte, split int, headerOnly bool, size int64) (*File, error) {
	d := &decoder{file: name, b: b}
	if len(b) < 4 || string(b[:4]) != magic {
		return nil, notGGUF(name, b)
	}
	d.off = 4
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 1:
		return nil, d.errAt(4, ErrVersion, "GGUF version 1 is not supported (expected 2 or 3); convert the model again with a current llama.cpp")
	case version == 2 || version == 3:
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, d.errAt(4, ErrVersion, "big-endian GGUF (version %d byte-swapped) is not supported; use a little-endian file", bits.ReverseBytes32(version))
	default:
		return nil, d.errAt(4, ErrVersion, "GGUF version %d is not supported (expected 2 or 3)", version)
	}
	tensorCount, err := d.u64("tensor count")
	if err != nil {
		return nil, err
	}
	kvCount, err := d.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// Every key-value takes at least 13 bytes and every tensor info at least 32: counts that
	// could not fit in the rest of the file are refused before anything is allocated.
	const minKV, minTensor = 8 + 4 + 1, 8 + 4 + 8 + 4 + 8
	if kvCount > d.left()/minKV {
		return nil, d.errAt(16, ErrTruncated, "metadata count %d cannot fit in the %d bytes left (each entry takes at least %d)", kvCount, d.left(), minKV)
	}
	if tensorCount > (d.left()-kvCount*minKV)/minTensor {
		return nil, d.errAt(8, ErrTruncated, "tensor count %d cannot fit in the %d bytes left (each tensor info takes at least %d)", tensorCount, d.left(), minTensor)
	}

	f := &File{Path: name, Version: version, Alignment: defaultAlignment,
		KV: make([]KeyValue, 0, kvCount), kvIndex: make(map[string]int, kvCount)}
	for i := range kvCount {
		start := d.off
		key, err := d.str(fmt.Sprintf("key of metadata entry %d", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, d.errAt(start, nil, "duplicate metadata key %q, expected each key once", key)
		}
		t, err := d.u32(fmt.Sprintf("type of %q", key))
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(t), 0, fmt.Sprintf("%q", key))
		if err != nil {
			return nil, err
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KeyValue{Key: key, Value: v})
	}

	if v, ok := f.Get(KeyAlignment); ok {
		a, isInt := v.AsUint()
		if !isInt || a == 0 || a > maxAlignment || a&(a-1) != 0 {
			return nil, &FormatError{File: name, Offset: -1, Msg: fmt.Sprintf("%s is %v, expected a power of two between 1 and %d", KeyAlignment, v, maxAlignment), Err: ErrMalformed}
		}
		f.Alignment = int(a)
	}

	f.Tensors = make([]TensorInfo, 0, tensorCount)
	f.tensorIndex = make(map[string]int, tensorCount)
	infoOffsets := make([]uint64, 0, tensorCount)
	for i := range tensorCount {
		start := d.off
		t, err := d.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.tensorIndex[t.Name]; dup {
			return nil, &FormatError{File: name, Offset: int64(start), Tensor: t.Name, Msg: "duplicate tensor name, expected each name once", Err: ErrMalformed}
		}
		t.Split = split
		f.tensorIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
		infoOffsets = append(infoOffsets, start)
	}

	align := uint64(f.Alignment)
	f.DataOffset = int64((d.off + align - 1) / align * align) // d.off ≤ len(b), no overflow
	if err := f.placeTensors(b, infoOffsets, headerOnly, uint64(max(size, int64(len(b))))); err != nil {
		return nil, err
	}
	return f, nil
}

// tensorInfo reads one tensor info; Offset is still relative to the data section.
func (d *decoder) tensorInfo(i uint64) (TensorInfo, error) {
	start := d.off
	name, err := d.str(fmt.Sprintf("name of tensor %d", i))
	if err != nil {
		return TensorInfo{}, err
	}
	terr := func(off uint64, err error, format string, args ...any) error {
		e := d.errAt(off, err, format, args...)
		e.Tensor = name
		return e
	}
	if name == "" {
		return TensorInfo{}, d.errAt(start, nil, "tensor %d has an empty name, expected a name", i)
	}
	nd, err := d.u32("dimension count of tensor " + name)
	if err != nil {
		return TensorInfo{}, err
	}
	if nd == 0 || nd > maxDims {
		return TensorInfo{}, terr(d.off-4, nil, "%d dimensions, expected 1 to %d", nd, maxDims)
	}
	dims := make([]uint64, nd)
	elems := uint64(1)
	for j := range dims {
		dims[j], err = d.u64("dimensions of tensor " + name)
		if err != nil {
			return TensorInfo{}, err
		}
		if dims[j] == 0 || dims[j] > math.MaxInt64 {
			return TensorInfo{}, terr(d.off-8, nil, "dimension %d is %d, expected 1 to %d", j, dims[j], int64(math.MaxInt64))
		}
		hi, lo := bits.Mul64(elems, dims[j])
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, terr(d.off-8, nil, "dimensions %v overflow: the element count exceeds %d", dims[:j+1], int64(math.MaxInt64))
		}
		elems = lo
	}
	tt, err := d.u32("type of tensor " + name)
	if err != nil {
		return TensorInfo{}, err
	}
	typ := quant.Type(tt)
	if !typ.Valid() {
		return TensorInfo{}, terr(d.off-4, ErrTensorType, "unknown tensor type %d, expected a GGML type id this build knows (%s)", tt, quant.SupportedNames())
	}
	if bs := uint64(typ.BlockSize()); dims[0]%bs != 0 {
		return TensorInfo{}, terr(start, nil, "row length %d is not a multiple of the %v block size %d", dims[0], typ, bs)
	}
	rel, err := d.u64("data offset of tensor " + name)
	if err != nil {
		return TensorInfo{}, err
	}
	// Size = rows × row bytes, with the row computed per block to stay exact and overflow-checked.
	blocksPerRow := dims[0] / uint64(typ.BlockSize())
	hi, rowBytes := bits.Mul64(blocksPerRow, uint64(typ.BlockBytes()))
	hi2, size := bits.Mul64(rowBytes, elems/dims[0])
	if hi != 0 || hi2 != 0 || size > math.MaxInt64 {
		return TensorInfo{}, terr(start, nil, "dimensions %v of %v take more than %d bytes", dims, typ, int64(math.MaxInt64))
	}
	return TensorInfo{Name: name, Type: typ, Dims: dims, Offset: rel, Size: int64(size)}, nil
}

// placeTensors turns relative offsets into absolute ones, checks alignment, bounds and overlap,
// and points each tensor's Data into b. With headerOnly, a tensor whose data the file does not
// (wholly) hold is marked Absent and keeps a nil Data; what of it lies past the file's size
// (len(b), or more when b is a prefix) counts in MissingBytes.
func (f *File) placeTensors(b []byte, infoOffsets []uint64, headerOnly bool, size uint64) error {
	align := uint64(f.Alignment)
	base := uint64(f.DataOffset)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		terr := func(err error, format string, args ...any) error {
			return &FormatError{File: f.Path, Offset: int64(infoOffsets[i]), Tensor: t.Name, Msg: fmt.Sprintf(format, args...), Err: err}
		}
		if t.Offset%align != 0 {
			return terr(ErrMalformed, "data offset %d is not a multiple of the alignment %d", t.Offset, align)
		}
		abs := base + t.Offset
		end := abs + uint64(t.Size)
		if t.Offset > math.MaxInt64-base || abs > math.MaxInt64-uint64(t.Size) {
			return terr(ErrTensorRange, "data (%d bytes of %v at offset %d in the data section) runs past the end of any file: the offset overflows, expected one within the file",
				t.Size, t.Type, t.Offset)
		}
		if end > uint64(len(b)) {
			if headerOnly {
				t.Offset, t.Absent = abs, true
				if end > size {
					f.MissingBytes += int64(end - max(abs, size))
				}
				continue
			}
			return terr(ErrTensorRange, "data (%d bytes of %v at offset %d in the data section) runs past the end of the file: expected it within %d bytes, the file has %d; "+
				"the file is cut short (an unfinished download?): it can be planned from its header (vkllm plan) but not loaded until it is whole",
				t.Size, t.Type, t.Offset, end, len(b))
		}
		t.Offset = abs
		t.Data = b[abs:end:end]
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, c int) int {
		ta, tc := &f.Tensors[a], &f.Tensors[c]
		if ta.Offset != tc.Offset {
			if ta.Offset < tc.Offset {
				return -1
			}
			return 1
		}
		return a - c
	})
	for k := 1; k < len(order); k++ {
		prev, cur := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if prevEnd := prev.Offset + uint64(prev.Size); cur.Offset < prevEnd {
			return &FormatError{File: f.Path, Offset: int64(cur.Offset), Tensor: cur.Name, Err: ErrTensorRange,
				Msg: fmt.Sprintf("data [%d, %d) overlaps tensor %q at [%d, %d); expected tensors not to share bytes",
					cur.Offset, cur.Offset+uint64(cur.Size), prev.Name, prev.Offset, prevEnd)}
		}
	}
	return nil
}

func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

// legacyMagic are the first bytes of the formats GGUF replaced (GGML, GGMF, GGJT: a
// little-endian uint32 magic).
var legacyMagic = []string{"lmgg", "fmgg", "tjgg"}

// notGGUF is the error for a file that does not start with "GGUF". It says what the file is not
// and what to do, without quoting the file's bytes or its size (the path may name any file).
func notGGUF(name string, b []byte) *FormatError {
	msg := `not a GGUF file (a GGUF model starts with the bytes "GGUF"); choose a .gguf model file`
	switch {
	case len(b) == 0:
		msg = "not a GGUF file: the file is empty; choose a .gguf model file"
	case len(b) >= 4 && slices.Contains(legacyMagic, string(b[:4])):
		msg = "not a GGUF file: it is an older GGML/GGJT model; convert it to GGUF with llama.cpp's convert scripts"
	}
	return &FormatError{File: name, Offset: -1, Msg: msg, Err: ErrNotGGUF}
}
