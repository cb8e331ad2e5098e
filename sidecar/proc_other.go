//go:build !linux && !windows

package sidecar

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
