//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package gguf

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// mapFile maps path read-only. unmap releases it; calling it twice is harmless. A path that is
// not a regular file is refused before it is opened: opening a FIFO blocks until a writer comes,
// and reading a device may never end. The open is non-blocking as well, so a file swapped for a
// FIFO after the check cannot hang it either.
func mapFile(path string) (data []byte, unmap func() error, err error) {
	if err := checkRegular(path); err != nil {
		return nil, nil, err
	}
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, nil, notRegular(path, st.Mode())
	}
	size := st.Size()
	if size == 0 {
		return []byte{}, func() error { return nil }, nil
	}
	if size > math.MaxInt {
		return nil, nil, fmt.Errorf("map %s: %d bytes exceed this platform's address space", path, size)
	}
	data, err = syscall.Mmap(int(fh.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	done := false
	return data, func() error {
		if done {
			return nil
		}
		done = true
		if err := syscall.Munmap(data); err != nil {
			return fmt.Errorf("munmap %s: %w", path, err)
		}
		return nil
	}, nil
}

// canMap: OpenHeader maps the file and touches only the header's pages.
const canMap = true
