package gguf

import (
	"fmt"
	"io/fs"
	"os"
)

// checkRegular refuses a path that is not a regular file (following symbolic links), without
// opening it.
func checkRegular(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return notRegular(path, st.Mode())
	}
	return nil
}

// notRegular is the error for a model path naming something other than a regular file.
func notRegular(path string, mode fs.FileMode) error {
	return &notRegularError{path: path, kind: FileKind(mode)}
}

// notRegularError matches ErrNotRegular.
type notRegularError struct{ path, kind string }

func (e *notRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file; a model path must name a .gguf file", e.path, e.kind)
}

func (e *notRegularError) Is(target error) bool { return target == ErrNotRegular }

// FileKind names what a file of this non-regular mode is ("a named pipe (FIFO)", "a directory",
// ...), for errors that refuse such a path.
func FileKind(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "a special file"
	}
}
