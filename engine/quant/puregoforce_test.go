//go:build !amd64 || purego

package quant

// forcePureGo is a no-op: only the pure Go kernels are built.
func forcePureGo() (restore func()) { return func() {} }
