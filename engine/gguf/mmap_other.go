//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package gguf

import "os"

// mapFile reads the whole file into memory on platforms without the mmap path. A path that is
// not a regular file is refused before it is opened.
func mapFile(path string) (data []byte, unmap func() error, err error) {
	if err := checkRegular(path); err != nil {
		return nil, nil, err
	}
	data, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}

// canMap: without a mapping, OpenHeader reads the header from the first bytes (openPrefix).
const canMap = false
