//go:build linux

package gguf

import (
	"syscall"
	"unsafe"
)

// madvPopulateRead is Linux's MADV_POPULATE_READ (5.14): fault the range in, readable, without
// touching it from user space.
const madvPopulateRead = 22

// populate maps b's pages into the process: MADV_POPULATE_READ, or on a kernel without it a
// read of one byte a page.
func populate(b []byte) {
	if len(b) == 0 {
		return
	}
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), madvPopulateRead)
	if errno == 0 {
		return
	}
	touch(b)
}

// physicalMemory is the machine's memory in bytes (0: unknown).
func physicalMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
