//go:build !amd64 || purego

package quant

// Kernels names the dot-product implementation in use, for logs and benchmark records.
func Kernels() string { return "pure-go" }

func dotF32(w []byte, x []float32) float32  { return dotF32Go(w, x) }
func dotF16(w []byte, x []float32) float32  { return dotF16Go(w, x) }
func dotBF16(w []byte, x []float32) float32 { return dotBF16Go(w, x) }
func roundF16(dst, x []float32)             { roundF16Go(dst, x) }
func dotQ8_0(w, x []byte) float32           { return dotQ8_0Go(w, x) }
func dotQ4_0(w, x []byte) float32           { return dotQ4_0Go(w, x) }
func dotQ5_0(w, x []byte) float32           { return dotQ5_0Go(w, x) }
func dotQ4_1(w, x []byte) float32           { return dotQ4_1Go(w, x) }
func dotQ5_1(w, x []byte) float32           { return dotQ5_1Go(w, x) }
func dotQ2K(w, x []byte) float32            { return dotQ2KGo(w, x) }
func dotQ3K(w, x []byte) float32            { return dotQ3KGo(w, x) }
func dotQ4K(w, x []byte) float32            { return dotQ4KGo(w, x) }
func dotQ5K(w, x []byte) float32            { return dotQ5KGo(w, x) }
func dotQ6K(w, x []byte) float32            { return dotQ6KGo(w, x) }

func dotBatch4(weight Type, row []byte, xs *[4][]byte, nb int, out *[4]float32) bool {
	return false
}
