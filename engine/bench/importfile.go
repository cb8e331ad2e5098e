package bench

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/vkllm/vkllm/engine/gguf"
)

// MaxLlamaBenchBytes is the largest llama-bench output ReadLlamaBenchFile reads: a run of a
// thousand tests with their samples is well under a megabyte.
const MaxLlamaBenchBytes = 64 << 20

// ReadLlamaBenchFile parses the llama-bench JSON or JSONL file at path (ParseLlamaBench). A path
// that is not a regular file (a named pipe, /dev/zero, a directory) and a file over
// MaxLlamaBenchBytes are refused before they are read, so neither can hang the caller or fill
// its memory.
func ReadLlamaBenchFile(path string) ([]Record, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file: give the file llama-bench -o json or -o jsonl wrote", path, gguf.FileKind(st.Mode()))
	}
	if st.Size() > MaxLlamaBenchBytes {
		return nil, fmt.Errorf("%s has %d bytes, more than the %d of any llama-bench output: is it the right file?", path, st.Size(), MaxLlamaBenchBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxLlamaBenchBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxLlamaBenchBytes { // it grew after the check
		return nil, fmt.Errorf("%s has more than the %d bytes of any llama-bench output: is it the right file?", path, MaxLlamaBenchBytes)
	}
	return ParseLlamaBench(bytes.NewReader(data))
}
