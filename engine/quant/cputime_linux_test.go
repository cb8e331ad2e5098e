package quant

import "syscall"

// threadCPU returns the CPU time the calling OS thread has used, in nanoseconds. The build
// machines are shared, so the benchmarks report CPU time per operation besides wall time.
func threadCPU() int64 {
	var ru syscall.Rusage
	const rusageThread = 1
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
