//go:build !linux

package gguf

// populate maps b's pages into the process by reading one byte a page.
func populate(b []byte) { touch(b) }

// physicalMemory is the machine's memory in bytes: unknown here.
func physicalMemory() int64 { return 0 }
