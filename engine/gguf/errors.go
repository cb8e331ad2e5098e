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
	ErrMalformed   = errors.New("malformed GGUF structure")
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
	if r := e.Remedy(); r != "" {
		b.WriteString("; ")
		b.WriteString(r)
	}
	return b.String()
}

// Remedy is what the user can do about the error, where its message does not already say it
// ("" where it does):
// a structure no writer makes, data out of range or a header cut short mean a damaged or
// incomplete file; an unknown version or tensor type, damage or a format newer than this build.
func (e *FormatError) Remedy() string {
	for _, said := range []string{"download", "convert", "choose", "open the first part", "use a little-endian"} {
		if strings.Contains(e.Msg, said) {
			return ""
		}
	}
	switch {
	case errors.Is(e.Err, ErrVersion):
		return "the file is damaged, or newer than this build reads: download it again, or convert the model with a llama.cpp that writes GGUF version 3"
	case errors.Is(e.Err, ErrTensorType):
		return "the file is damaged, or uses a type newer than this build: download it again, or quantize the model to a listed type"
	case errors.Is(e.Err, ErrMalformed), errors.Is(e.Err, ErrTensorRange), errors.Is(e.Err, ErrTruncated):
		return "the file is damaged or incomplete: download or convert it again"
	}
	return ""
}

func (e *FormatError) Unwrap() error { return e.Err }
