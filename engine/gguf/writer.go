package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/vkllm/vkllm/engine/quant"
)

// Writer builds a GGUF v3 file in memory order: metadata in the order first set, tensors in the
// order added, each tensor's data aligned to general.alignment (32 unless set).
type Writer struct {
	kv      []KeyValue
	kvIndex map[string]int
	tensors []wtensor
	names   map[string]bool
	err     error // first error of a Set call, reported by WriteTo
}

type wtensor struct {
	name string
	typ  quant.Type
	dims []uint64
	size uint64 // the data's bytes, whether held or not
	data []byte // nil for a tensor added by AddTensorShape
}

// NewWriter returns an empty writer.
func NewWriter() *Writer {
	return &Writer{kvIndex: map[string]int{}, names: map[string]bool{}}
}

// SetValue sets key to v, replacing an earlier value in place (keeping its position).
func (w *Writer) SetValue(key string, v Value) {
	if v.x == nil {
		w.fail(fmt.Errorf("set %q: the zero Value has no type", key))
		return
	}
	if i, ok := w.kvIndex[key]; ok {
		w.kv[i].Value = v
		return
	}
	w.kvIndex[key] = len(w.kv)
	w.kv = append(w.kv, KeyValue{Key: key, Value: v})
}

// Set sets key to any value ValueOf accepts (every GGUF type, arrays of arrays as []Value).
func (w *Writer) Set(key string, x any) error {
	v, err := ValueOf(x)
	if err != nil {
		return fmt.Errorf("set %q: %w", key, err)
	}
	w.SetValue(key, v)
	return nil
}

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// SetString sets a string value.
func (w *Writer) SetString(key, v string) { w.SetValue(key, Value{typ: TypeString, x: v}) }

// SetUint32 sets a uint32 value.
func (w *Writer) SetUint32(key string, v uint32) { w.SetValue(key, Value{typ: TypeUint32, x: v}) }

// SetInt32 sets an int32 value.
func (w *Writer) SetInt32(key string, v int32) { w.SetValue(key, Value{typ: TypeInt32, x: v}) }

// SetUint64 sets a uint64 value.
func (w *Writer) SetUint64(key string, v uint64) { w.SetValue(key, Value{typ: TypeUint64, x: v}) }

// SetFloat32 sets a float32 value.
func (w *Writer) SetFloat32(key string, v float32) { w.SetValue(key, Value{typ: TypeFloat32, x: v}) }

// SetBool sets a bool value.
func (w *Writer) SetBool(key string, v bool) { w.SetValue(key, Value{typ: TypeBool, x: v}) }

// SetStrings sets an array of strings.
func (w *Writer) SetStrings(key string, v []string) { w.SetValue(key, array(TypeString, v)) }

// SetFloat32s sets an array of float32.
func (w *Writer) SetFloat32s(key string, v []float32) { w.SetValue(key, array(TypeFloat32, v)) }

// SetInt32s sets an array of int32.
func (w *Writer) SetInt32s(key string, v []int32) { w.SetValue(key, array(TypeInt32, v)) }

// Delete removes key if set.
func (w *Writer) Delete(key string) {
	i, ok := w.kvIndex[key]
	if !ok {
		return
	}
	w.kv = append(w.kv[:i], w.kv[i+1:]...)
	delete(w.kvIndex, key)
	for j := i; j < len(w.kv); j++ {
		w.kvIndex[w.kv[j].Key] = j
	}
}

// AddTensor adds a tensor whose data is already in typ's layout. data is kept, not copied: it
// must not change before WriteTo.
func (w *Writer) AddTensor(name string, typ quant.Type, dims []uint64, data []byte) error {
	size, err := w.checkTensor(name, typ, dims)
	if err != nil {
		return err
	}
	if int64(len(data)) != size {
		return fmt.Errorf("add tensor %q: %d bytes of data, expected %d for %v %v", name, len(data), size, typ, dims)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{name: name, typ: typ, dims: append([]uint64(nil), dims...), size: uint64(size), data: data})
	return nil
}

// AddTensorShape adds a tensor's name, type and dimensions without its data, for a header-only
// file (WriteHeaderTo): its info records the offset its data would have in the whole file.
func (w *Writer) AddTensorShape(name string, typ quant.Type, dims []uint64) error {
	size, err := w.checkTensor(name, typ, dims)
	if err != nil {
		return err
	}
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{name: name, typ: typ, dims: append([]uint64(nil), dims...), size: uint64(size)})
	return nil
}

// checkTensor checks a tensor to add and returns its data's size in bytes.
func (w *Writer) checkTensor(name string, typ quant.Type, dims []uint64) (int64, error) {
	if name == "" {
		return 0, errors.New("add tensor: empty name")
	}
	if w.names[name] {
		return 0, fmt.Errorf("add tensor %q: a tensor of that name was already added", name)
	}
	if !typ.Valid() {
		return 0, fmt.Errorf("add tensor %q: unknown tensor type %v", name, typ)
	}
	if len(dims) == 0 || len(dims) > maxDims {
		return 0, fmt.Errorf("add tensor %q: %d dimensions, expected 1 to %d", name, len(dims), maxDims)
	}
	n, err := elements(dims)
	if err != nil {
		return 0, fmt.Errorf("add tensor %q: %w", name, err)
	}
	if dims[0]%uint64(typ.BlockSize()) != 0 {
		return 0, fmt.Errorf("add tensor %q: row length %d is not a multiple of the %v block size %d", name, dims[0], typ, typ.BlockSize())
	}
	row, err := typ.RowBytes(int(dims[0]))
	if err != nil {
		return 0, fmt.Errorf("add tensor %q: %w", name, err)
	}
	rows := n / int64(dims[0])
	if rows > math.MaxInt64/int64(row) {
		return 0, fmt.Errorf("add tensor %q: dimensions %v are too large", name, dims)
	}
	return int64(row) * rows, nil
}

// AddTensorF32 quantizes values (ne0 fastest) to typ and adds the tensor.
func (w *Writer) AddTensorF32(name string, typ quant.Type, dims []uint64, values []float32) error {
	n, err := elements(dims)
	if err != nil {
		return fmt.Errorf("add tensor %q: %w", name, err)
	}
	if int64(len(values)) != n {
		return fmt.Errorf("add tensor %q: %d values, expected %d for dimensions %v", name, len(values), n, dims)
	}
	data, err := quant.Quantize(typ, values)
	if err != nil {
		return fmt.Errorf("add tensor %q: quantize to %v: %w", name, typ, err)
	}
	return w.AddTensor(name, typ, dims, data)
}

func elements(dims []uint64) (int64, error) {
	n := int64(1)
	for i, d := range dims {
		if d == 0 || d > math.MaxInt64 || n > math.MaxInt64/int64(d) {
			return 0, fmt.Errorf("dimension %d of %v is out of range (each at least 1, product at most %d)", i, dims, int64(math.MaxInt64))
		}
		n *= int64(d)
	}
	return n, nil
}

// alignment is general.alignment if set, else the default.
func (w *Writer) alignment() (uint64, error) {
	i, ok := w.kvIndex[KeyAlignment]
	if !ok {
		return defaultAlignment, nil
	}
	v := w.kv[i].Value
	a, isInt := v.AsUint()
	if !isInt || a == 0 || a > maxAlignment || a&(a-1) != 0 {
		return 0, fmt.Errorf("write gguf: %s is %v, expected a power of two up to %d", KeyAlignment, v, maxAlignment)
	}
	return a, nil
}

// WriteTo writes the file: header, metadata, tensor infos, padding, aligned tensor data.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	for _, t := range w.tensors {
		if t.data == nil {
			return 0, fmt.Errorf("write gguf: tensor %q has no data (added by AddTensorShape): write the header alone with WriteHeaderTo", t.name)
		}
	}
	return w.write(out, true)
}

// WriteHeaderTo writes a header-only file: header, metadata and tensor infos with the offsets the
// whole file would have, padded to where the tensor data would start, and no tensor data.
// OpenHeader reads it (its MissingBytes is the data the whole file would hold).
func (w *Writer) WriteHeaderTo(out io.Writer) (int64, error) { return w.write(out, false) }

func (w *Writer) write(out io.Writer, withData bool) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	align, err := w.alignment()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: bufio.NewWriterSize(out, 1<<16)}
	e := encoder{w: cw}
	e.bytes([]byte(magic))
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.typ))
		e.value(kv.Value)
	}
	var off uint64
	for _, t := range w.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e.u64(d)
		}
		e.u32(uint32(t.typ))
		e.u64(off)
		off = pad(off+t.size, align)
	}
	e.zeros(pad(uint64(cw.n), align) - uint64(cw.n))
	for _, t := range w.tensors {
		if !withData {
			break
		}
		e.bytes(t.data)
		e.zeros(pad(t.size, align) - t.size)
	}
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	if cw.err != nil {
		return cw.n, fmt.Errorf("write gguf: %w", cw.err)
	}
	return cw.n, nil
}

// Bytes returns the whole file in memory (for OpenBytes in tests).
func (w *Writer) Bytes() ([]byte, error) {
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteFile writes the file to path (through a temporary file renamed into place).
func (w *Writer) WriteFile(path string) error { return w.writeFile(path, w.WriteTo) }

// WriteHeaderFile writes the header-only file (WriteHeaderTo) to path, as WriteFile does.
func (w *Writer) WriteHeaderFile(path string) error { return w.writeFile(path, w.WriteHeaderTo) }

func (w *Writer) writeFile(path string, write func(io.Writer) (int64, error)) error {
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	_, err = write(fh)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write gguf %s: %w", path, err)
	}
	return nil
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

// encoder writes little-endian fields, remembering the first error.
type encoder struct {
	w   *countWriter
	buf [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.w.err != nil {
		return
	}
	n, err := e.w.w.Write(b)
	e.w.n += int64(n)
	e.w.err = err
}

func (e *encoder) zeros(n uint64) {
	var z [64]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		e.bytes(z[:k])
		n -= k
	}
}

func (e *encoder) u8(v uint8) { e.bytes([]byte{v}) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.bytes(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.bytes(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.bytes(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.bytes([]byte(s))
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// value writes v's payload (its type tag is written by the caller).
func (e *encoder) value(v Value) {
	switch x := v.x.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case bool:
		e.u8(b2u(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	default:
		e.u32(uint32(v.elem))
		n := v.Len()
		e.u64(uint64(n))
		if a, ok := x.([]uint8); ok {
			e.bytes(a)
			return
		}
		for i := range n { // elements carry no type tag; nested arrays start with their own header
			e.value(v.Index(i))
		}
	}
}
