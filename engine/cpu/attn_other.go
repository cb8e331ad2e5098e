//go:build !amd64 || purego

package cpu

func dotF16(a []float32, b []uint16) float32 { return dotF16Go(a, b) }
func madF16(acc, v []uint16, s float32)      { madF16Go(acc, v, s) }
func scaleF16(acc []uint16, s float32)       { scaleF16Go(acc, s) }

// madF16Seq has no kernel on this platform.
func madF16Seq(out []float32, v []uint16, vStride int, ms, vs []float32) bool { return false }

// dotF16Rows has no kernel on this platform.
func dotF16Rows(q []float32, k []uint16, kStride int, scale float32, out []float32) bool {
	return false
}
