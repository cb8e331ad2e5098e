//go:build !linux

package quant

// threadCPU is not measured here; the benchmarks then report wall time only.
func threadCPU() int64 { return 0 }
