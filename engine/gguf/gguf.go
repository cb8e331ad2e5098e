// Package gguf reads and writes GGUF model files (versions 2 and 3): metadata of every value
// type, tensor infos and tensor data. Files are memory-mapped and tensor data is never copied;
// split models ("name-00001-of-00003.gguf") open as one File. Malformed files produce a
// *FormatError naming the file, the byte offset or tensor, and what was expected; the reader
// never allocates more than the file's own size could describe.
package gguf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unsafe"

	"github.com/vkllm/vkllm/engine/quant"
)

// Well-known metadata keys this package interprets.
const (
	KeyAlignment    = "general.alignment"
	KeyArchitecture = "general.architecture"
	KeyName         = "general.name"
	KeySplitNo      = "split.no"
	KeySplitCount   = "split.count"
	KeySplitTensors = "split.tensors.count"
)

// File is an open GGUF model. For a split model it holds the metadata of the first part and the
// tensors of all parts, in file order, part after part.
type File struct {
	Path      string       // the file opened (the first part of a split model); OpenBytes' name
	Version   uint32       // 2 or 3
	Alignment int          // tensor data alignment (general.alignment, default 32)
	Tensors   []TensorInfo // in file order
	KV        []KeyValue   // in file order

	DataOffset int64    // start of the (first part's) tensor data section
	Size       int64    // bytes of all parts together
	Parts      []string // paths of every part; one entry for an unsplit file
	// MissingBytes is how much tensor data the file lacks (OpenHeader of a header-only or
	// truncated file); 0 for a whole file, and always 0 from Open.
	MissingBytes int64

	kvIndex     map[string]int
	tensorIndex map[string]int
	unmap       []func() error
	mapped      [][]byte    // each mapped part's tensor data (Prefault)
	prefault    *prefaulter // a Prefault run, stopped by Close
}

// KeyValue is one metadata entry.
type KeyValue struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor and gives its bytes.
type TensorInfo struct {
	Name   string
	Type   quant.Type
	Dims   []uint64 // ne0 first: Dims[0] is the row length
	Offset uint64   // absolute byte offset in its own file (part)
	Size   int64    // bytes
	Data   []byte   // view into the file's mapping; valid until Close
	Split  int      // index of the part (0 for an unsplit file)
	// Absent is set by OpenHeader when Data does not hold this tensor: the file ends before its
	// data does (a header-only or cut download; File.MissingBytes counts it), or, where files are
	// not mapped, its bytes were not read. Data is nil then.
	Absent bool
}

// Elements is the number of elements (the product of the dimensions).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Rows is the number of rows of Dims[0] elements.
func (t TensorInfo) Rows() int64 {
	if len(t.Dims) == 0 || t.Dims[0] == 0 {
		return 0
	}
	return t.Elements() / int64(t.Dims[0])
}

// Open maps the GGUF file at path. When path is one part of a split model
// ("name-0000K-of-0000N.gguf" with split.count N), every part is opened and the tensors merged.
// Close releases the mapping; tensor Data must not be used after it.
func Open(path string) (*File, error) { return open(path, false) }

// OpenHeader is Open for what needs only the header (metadata and tensor infos): planning and the
// model library. The weights may be absent or cut (a header-only file, the first bytes of a
// download): such tensors are marked Absent and MissingBytes says how much is missing. Only the
// header's pages of the mapping are read. A header that is itself cut short is still an error
// (wrapping ErrTruncated) that says so.
func OpenHeader(path string) (*File, error) { return open(path, true) }

// ShapesOnly marks every tensor Absent and drops its Data, so what reads f from here on (a
// model's shape check, the plan) reads no weight at all: not even the norm vectors a mapped
// file would page in. MissingBytes and Complete still say what the file holds.
func (f *File) ShapesOnly() {
	for i := range f.Tensors {
		f.Tensors[i].Absent, f.Tensors[i].Data = true, nil
	}
}

// Complete reports whether the file holds every tensor's data (always true from Open).
func (f *File) Complete() bool { return f.MissingBytes == 0 }

func open(path string, headerOnly bool) (*File, error) {
	f, err := openOne(path, 0, headerOnly)
	if err != nil {
		return nil, err
	}
	count := 1
	if v, ok := f.Get(KeySplitCount); ok {
		n, isInt := v.AsUint()
		if !isInt || n == 0 || n > 99999 {
			f.Close()
			return nil, &FormatError{File: path, Offset: -1, Msg: fmt.Sprintf("%s is %v, expected a part count from 1 to 99999", KeySplitCount, v)}
		}
		count = int(n)
	}
	if count == 1 {
		return f, nil
	}
	prefix, no, total, ok := splitName(path)
	if !ok {
		f.Close()
		return nil, fmt.Errorf("open split gguf %s: %s says %d parts but the name does not follow \"NAME-00001-of-%05d.gguf\"; rename the parts as gguf-split made them", path, KeySplitCount, count, count)
	}
	if total != count {
		f.Close()
		return nil, fmt.Errorf("open split gguf %s: the name says %d parts but %s is %d", path, total, KeySplitCount, count)
	}
	if no != 1 {
		// Opening any part opens the whole model from its first part.
		f.Close()
		return open(splitPath(prefix, 1, count), headerOnly)
	}
	if err := f.checkSplitNo(0, count); err != nil {
		f.Close()
		return nil, err
	}
	for k := 2; k <= count; k++ {
		p := splitPath(prefix, k, count)
		part, err := openOne(p, k-1, headerOnly)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open part %d of %d of %s: %w", k, count, path, err)
		}
		f.unmap = append(f.unmap, part.unmap...)
		f.mapped = append(f.mapped, part.mapped...)
		part.unmap, part.mapped = nil, nil
		if v, ok := part.Get(KeySplitCount); !ok || !sameUint(v, uint64(count)) {
			f.Close()
			return nil, &FormatError{File: p, Offset: -1, Msg: fmt.Sprintf("%s is %v, expected %d like the first part", KeySplitCount, v, count)}
		}
		if err := part.checkSplitNo(k-1, count); err != nil {
			f.Close()
			return nil, err
		}
		for _, t := range part.Tensors {
			if _, dup := f.tensorIndex[t.Name]; dup {
				f.Close()
				return nil, &FormatError{File: p, Offset: int64(t.Offset), Tensor: t.Name, Msg: "tensor also present in an earlier part, expected each tensor in one part"}
			}
			f.tensorIndex[t.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, t)
		}
		f.Size += part.Size
		f.MissingBytes += part.MissingBytes
		f.Parts = append(f.Parts, p)
	}
	if v, ok := f.Get(KeySplitTensors); ok {
		if n, isInt := v.AsUint(); isInt && n != uint64(len(f.Tensors)) {
			f.Close()
			return nil, &FormatError{File: path, Offset: -1, Msg: fmt.Sprintf("%s is %d but the %d parts hold %d tensors; a part is missing or stale", KeySplitTensors, n, count, len(f.Tensors))}
		}
	}
	return f, nil
}

func sameUint(v Value, n uint64) bool {
	u, ok := v.AsUint()
	return ok && u == n
}

func (f *File) checkSplitNo(want, count int) error {
	v, ok := f.Get(KeySplitNo)
	if !ok {
		return nil
	}
	if !sameUint(v, uint64(want)) {
		return &FormatError{File: f.Path, Offset: -1, Msg: fmt.Sprintf("%s is %v, expected %d for part %d of %d", KeySplitNo, v, want, want+1, count)}
	}
	return nil
}

// splitName parses "PREFIX-0000K-of-0000N.gguf".
func splitName(path string) (prefix string, no, total int, ok bool) {
	const tail = len("-00001-of-00003.gguf")
	if len(path) < tail || !strings.EqualFold(filepath.Ext(path), ".gguf") {
		return "", 0, 0, false
	}
	s := path[len(path)-tail:]
	if s[0] != '-' || s[6:10] != "-of-" {
		return "", 0, 0, false
	}
	no, ok1 := digits5(s[1:6])
	total, ok2 := digits5(s[10:15])
	if !ok1 || !ok2 || no < 1 || no > total {
		return "", 0, 0, false
	}
	return path[:len(path)-tail], no, total, true
}

func digits5(s string) (int, bool) {
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func splitPath(prefix string, no, total int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no, total)
}

// openOne maps and parses a single file.
func openOne(path string, split int, headerOnly bool) (*File, error) {
	if headerOnly && !canMap {
		return openPrefix(path, split) // without a mapping, read the header, not the weights
	}
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("open gguf: %w", err)
	}
	f, err := parse(path, data, split, headerOnly)
	if err != nil {
		if headerOnly {
			err = headerCut(path, err)
		}
		if uerr := unmap(); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return nil, err
	}
	f.Size = int64(len(data))
	f.Parts = []string{path}
	f.unmap = []func() error{unmap}
	if !headerOnly && f.DataOffset < int64(len(data)) {
		f.mapped = [][]byte{data[f.DataOffset:]}
	}
	return f, nil
}

// openPrefix parses the header of the file at path from its first bytes, reading four times
// more while the header runs past what was read: the weights are never read. Tensors beyond
// the bytes read are Absent; MissingBytes counts only what lies past the file's end.
func openPrefix(path string, split int) (*File, error) {
	if err := checkRegular(path); err != nil {
		return nil, fmt.Errorf("open gguf: %w", err)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("open gguf: stat %s: %w", path, err)
	}
	size := st.Size()
	for n := min(int64(prefixStart), size); ; n = min(4*n, size) {
		buf := make([]byte, n)
		if _, err := io.ReadFull(fh, buf[:n]); err != nil {
			return nil, fmt.Errorf("open gguf: read the header of %s: %w", path, err)
		}
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("open gguf: %w", err)
		}
		f, err := parseSized(path, buf, split, true, size)
		if err == nil {
			f.Size, f.Parts = size, []string{path}
			return f, nil
		}
		if n >= size || !errors.Is(err, ErrTruncated) {
			return nil, headerCut(path, err)
		}
	}
}

// prefixStart is the first read of openPrefix: most headers (a vocabulary of 32K-150K tokens)
// fit in a few MiB.
var prefixStart = 4 << 20

// memAlign is the alignment of the start of a file in memory: mappings are page-aligned, and
// OpenBytes copies a buffer that is not, so that tensor data (aligned within the file) can be
// viewed as []float32 or []uint16 without misaligned pointers.
const memAlign = 64

// OpenBytes parses a GGUF file held in memory (the embedded model). Tensor Data points into data
// (into a copy when data does not start on a 64-byte boundary), which must stay unchanged while
// the File is used. A split part cannot be opened this way.
func OpenBytes(name string, data []byte) (*File, error) {
	if len(data) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(data)))%memAlign != 0 {
		buf := make([]byte, len(data)+memAlign)
		skip := (memAlign - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%memAlign)) % memAlign
		buf = buf[skip : skip+len(data) : skip+len(data)]
		copy(buf, data)
		data = buf
	}
	f, err := parse(name, data, 0, false)
	if err != nil {
		return nil, err
	}
	if v, ok := f.Get(KeySplitCount); ok {
		if n, _ := v.AsUint(); n != 1 {
			return nil, &FormatError{File: name, Offset: -1, Msg: fmt.Sprintf("part of a split model (%s is %v); open the first part's file with Open so all parts load", KeySplitCount, v)}
		}
	}
	f.Size = int64(len(data))
	f.Parts = []string{name}
	return f, nil
}

// Close unmaps the file (every part). Tensor Data must not be used afterwards. Close is safe to
// call more than once.
func (f *File) Close() error {
	f.stopPrefault()
	var errs []error
	for _, u := range f.unmap {
		if err := u(); err != nil {
			errs = append(errs, err)
		}
	}
	f.unmap, f.mapped = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close gguf %s: %w", f.Path, err)
	}
	return nil
}

// Get returns the metadata value of key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, _ := f.Get(key)
	return v.AsString()
}

// Uint returns a non-negative integer value of any width.
func (f *File) Uint(key string) (uint64, bool) {
	v, _ := f.Get(key)
	return v.AsUint()
}

// Int returns an integer value of any width that fits an int64.
func (f *File) Int(key string) (int64, bool) {
	v, _ := f.Get(key)
	return v.AsInt()
}

// Float returns a float value, or an integer value converted.
func (f *File) Float(key string) (float64, bool) {
	v, _ := f.Get(key)
	return v.AsFloat()
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, _ := f.Get(key)
	return v.AsBool()
}

// Strings returns an array of strings (shared with the File: do not modify).
func (f *File) Strings(key string) ([]string, bool) {
	v, _ := f.Get(key)
	return v.AsStrings()
}

// Float32s returns an array of float32 (shared with the File: do not modify); float64 arrays
// are converted.
func (f *File) Float32s(key string) ([]float32, bool) {
	v, _ := f.Get(key)
	return v.AsFloat32s()
}

// Int32s returns an array of int32 (shared with the File: do not modify); other integer arrays
// are converted when every element fits.
func (f *File) Int32s(key string) ([]int32, bool) {
	v, _ := f.Get(key)
	return v.AsInt32s()
}

// Bools returns an array of bools (shared with the File: do not modify).
func (f *File) Bools(key string) ([]bool, bool) {
	v, _ := f.Get(key)
	return v.AsBools()
}

// Tensor returns the tensor named name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Architecture is general.architecture ("llama"), or "" when absent.
func (f *File) Architecture() string {
	s, _ := f.String(KeyArchitecture)
	return s
}

// ParamCount is the total number of tensor elements.
func (f *File) ParamCount() int64 {
	var n int64
	for _, t := range f.Tensors {
		n += t.Elements()
	}
	return n
}

// TypeCount is how many tensors and bytes one tensor type accounts for.
type TypeCount struct {
	Type    quant.Type
	Tensors int
	Bytes   int64
}

// TypeCounts lists the tensor types in the file, most bytes first.
func (f *File) TypeCounts() []TypeCount {
	var out []TypeCount
	for _, t := range f.Tensors {
		i := slices.IndexFunc(out, func(c TypeCount) bool { return c.Type == t.Type })
		if i < 0 {
			out = append(out, TypeCount{Type: t.Type})
			i = len(out) - 1
		}
		out[i].Tensors++
		out[i].Bytes += t.Size
	}
	slices.SortStableFunc(out, func(a, b TypeCount) int {
		switch {
		case a.Bytes > b.Bytes:
			return -1
		case a.Bytes < b.Bytes:
			return 1
		}
		return 0
	})
	return out
}

// Summary describes the file in one line for people, e.g.
// "stories260K.gguf: GGUF v3 llama, 292.8K params in 48 tensors (F32 48), 1.1 MiB".
// (String is the metadata getter.)
func (f *File) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: GGUF v%d", filepath.Base(f.Path), f.Version)
	if a := f.Architecture(); a != "" {
		b.WriteString(" " + a)
	}
	if len(f.Parts) > 1 {
		fmt.Fprintf(&b, " in %d parts", len(f.Parts))
	}
	fmt.Fprintf(&b, ", %s params in %d tensors", humanCount(f.ParamCount()), len(f.Tensors))
	if tc := f.TypeCounts(); len(tc) > 0 {
		b.WriteString(" (")
		for i, c := range tc {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%v %d", c.Type, c.Tensors)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ", %s", humanBytes(f.Size))
	if !f.Complete() {
		fmt.Fprintf(&b, ", header only (%s of tensor data missing)", humanBytes(f.MissingBytes))
	}
	return b.String()
}

// headerCut says, for OpenHeader, that a file cut inside its header cannot be planned either:
// the error keeps the *FormatError (and ErrTruncated) and adds what is needed.
func headerCut(path string, err error) error {
	var fe *FormatError
	if !errors.Is(err, ErrTruncated) || !errors.As(err, &fe) {
		return err
	}
	cut := *fe
	cut.Msg = "the file ends inside its header (" + fe.Msg + "); planning needs the whole header, the metadata and every tensor info: let the download get further"
	return &cut
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
