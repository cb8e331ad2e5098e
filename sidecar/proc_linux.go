package sidecar

import "syscall"

// childAttr makes the kernel kill the sidecar when the app dies, so no orphan engine keeps the GPU.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
