package gguf

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel causes a *FormatError may wrap; test with errors.Is.
var (
	ErrNotGGUF     = errors.New("not a GGUF file")
	ErrNotRegular  = errors.New("not a regular file")
	ErrVersion     = errors.New("unsupported GGUF version")
	ErrTruncated   = errors.New("file truncated")
	ErrTensorType  = errors.New("unknown tensor type")
	ErrTensorRange = errors.New("tensor data out of range")
)

// FormatError is a malformed or unsupported GGUF file: which file, the byte offset the problem
// was found at (-1 when it is not about one place), the tensor it concerns (if any), and what was
// expected.
type FormatError struct {
	File   string
	Offset int64
	Tensor string
	Msg    string
	Err    error // a sentinel above, or nil
}

func (e *FormatError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gguf %s", e.File)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " at offset %d", e.Offset)
	}
	if e.Tensor != "" {
		fmt.Fprintf(&b, ": tensor %q", e.Tensor)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func (e *FormatError) Unwrap() error { return e.Err }
