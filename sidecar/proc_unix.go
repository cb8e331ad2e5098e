//go:build !windows

package sidecar

import (
	"os"
	"syscall"
)

// stopProcess asks the sidecar to shut down cleanly.
func stopProcess(p *os.Process) { p.Signal(syscall.SIGTERM) }
