//go:build !linux

package bench

import "errors"

// PageCacheFraction is measured on Linux only.
func PageCacheFraction(path string) (float64, error) {
	return 0, errors.New("page cache residency is measured on Linux only")
}
