//go:build !linux

package store

// osFacts has no cheap portable source for kernel, CPU and RAM outside Linux yet; the hostname
// and GOOS/GOARCH from LocalMachine are what we record there.
func osFacts(m *Machine) {}
