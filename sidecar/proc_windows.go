package sidecar

import (
	"os"
	"syscall"
)

func childAttr() *syscall.SysProcAttr { return nil }

// stopProcess has no clean signal to send on Windows; the process is killed.
func stopProcess(p *os.Process) { p.Kill() }
