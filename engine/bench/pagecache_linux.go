package bench

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// PageCacheFraction is the share of a file's pages that are in the page cache now (mincore(2)
// on a fresh read-only mapping, which reads nothing itself).
func PageCacheFraction(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("page cache of %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("page cache of %s: %w", path, err)
	}
	if fi.Size() == 0 {
		return 1, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("page cache of %s: map: %w", path, err)
	}
	defer syscall.Munmap(data)
	page := int64(os.Getpagesize())
	vec := make([]byte, (fi.Size()+page-1)/page)
	_, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, fmt.Errorf("page cache of %s: mincore: %w", path, errno)
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	return float64(resident) / float64(len(vec)), nil
}
