//go:build amd64 && !purego

package quant

import "unsafe"

// hasAVX2 reports whether the CPU and OS support AVX2, FMA and F16C (the assembly kernels'
// needs). Without them the pure Go kernels run; they are also the reference the tests hold
// the assembly to.
var hasAVX2 = detectAVX2()

// Kernels names the dot-product implementation in use, for logs and benchmark records:
// "amd64-avx2" or "pure-go".
func Kernels() string {
	if hasAVX2 {
		return "amd64-avx2"
	}
	return "pure-go"
}

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

func detectAVX2() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fma     = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
		f16c    = 1 << 29
	)
	if ecx1&(fma|osxsave|avx|f16c) != fma|osxsave|avx|f16c {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // OS saves XMM and YMM state
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0
}

//go:noescape
func dotF32AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotF16AVX2(w *byte, x *float32, n int) float32

//go:noescape
func dotBF16AVX2(w *byte, x *float32, n int) float32

//go:noescape
func roundF16AVX2(dst, x *float32, n int)

//go:noescape
func dotQ8_0x4AVX2(w *byte, x *[4]*byte, nb int, out *[4]float32)

//go:noescape
func dotQ4_0x4AVX2(w *byte, x *[4]*byte, nb int, out *[4]float32)

//go:noescape
func dotQ8_0AVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ4_0AVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ5_0AVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ4_1AVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ5_1AVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ2KAVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ3KAVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ4KAVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ5KAVX2(w, x *byte, nb int) float32

//go:noescape
func dotQ6KAVX2(w, x *byte, nb int) float32

// dotF32 and dotF16 take row bytes for len(x) elements (checked by the caller).
func dotF32(w []byte, x []float32) float32 {
	n := len(x) &^ 31
	if !hasAVX2 || n == 0 {
		return dotF32Go(w, x)
	}
	s := dotF32AVX2(unsafe.SliceData(w), unsafe.SliceData(x), n)
	if n < len(x) {
		s += dotF32Go(w[4*n:], x[n:])
	}
	return s
}

func dotF16(w []byte, x []float32) float32 {
	n := len(x) &^ 31
	if !hasAVX2 || n == 0 {
		return dotF16Go(w, x)
	}
	s := dotF16AVX2(unsafe.SliceData(w), unsafe.SliceData(x), n)
	if n < len(x) {
		s += dotF16Go(w[2*n:], x[n:])
	}
	return s
}

func dotBF16(w []byte, x []float32) float32 {
	n := len(x) &^ 31
	if !hasAVX2 || n == 0 {
		return dotBF16Go(w, x)
	}
	s := dotBF16AVX2(unsafe.SliceData(w), unsafe.SliceData(x), n)
	if n < len(x) {
		s += dotBF16Go(w[2*n:], x[n:])
	}
	return s
}

// roundF16 sets dst[i] to x[i] rounded to binary16 precision.
func roundF16(dst, x []float32) {
	n := min(len(dst), len(x)) &^ 7
	if hasAVX2 && n > 0 {
		roundF16AVX2(unsafe.SliceData(dst), unsafe.SliceData(x), n)
	} else {
		n = 0
	}
	roundF16Go(dst[n:], x[n:])
}

func dotQ8_0(w, x []byte) float32 {
	nb := min(len(w), len(x)) / 34
	if !hasAVX2 || nb == 0 {
		return dotQ8_0Go(w, x)
	}
	return dotQ8_0AVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ4_0(w, x []byte) float32 {
	nb := min(len(w)/18, len(x)/34)
	if !hasAVX2 || nb == 0 {
		return dotQ4_0Go(w, x)
	}
	return dotQ4_0AVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ5_0(w, x []byte) float32 {
	nb := min(len(w)/22, len(x)/34)
	if !hasAVX2 || nb == 0 {
		return dotQ5_0Go(w, x)
	}
	return dotQ5_0AVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ4_1(w, x []byte) float32 {
	nb := min(len(w)/20, len(x)/36)
	if !hasAVX2 || nb == 0 {
		return dotQ4_1Go(w, x)
	}
	return dotQ4_1AVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ5_1(w, x []byte) float32 {
	nb := min(len(w)/24, len(x)/36)
	if !hasAVX2 || nb == 0 {
		return dotQ5_1Go(w, x)
	}
	return dotQ5_1AVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ2K(w, x []byte) float32 {
	nb := min(len(w)/84, len(x)/292)
	if !hasAVX2 || nb == 0 {
		return dotQ2KGo(w, x)
	}
	return dotQ2KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ3K(w, x []byte) float32 {
	nb := min(len(w)/110, len(x)/292)
	if !hasAVX2 || nb == 0 {
		return dotQ3KGo(w, x)
	}
	return dotQ3KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ4K(w, x []byte) float32 {
	nb := min(len(w)/144, len(x)/292)
	if !hasAVX2 || nb == 0 {
		return dotQ4KGo(w, x)
	}
	return dotQ4KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ5K(w, x []byte) float32 {
	nb := min(len(w)/176, len(x)/292)
	if !hasAVX2 || nb == 0 {
		return dotQ5KGo(w, x)
	}
	return dotQ5KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

func dotQ6K(w, x []byte) float32 {
	nb := min(len(w)/210, len(x)/292)
	if !hasAVX2 || nb == 0 {
		return dotQ6KGo(w, x)
	}
	return dotQ6KAVX2(unsafe.SliceData(w), unsafe.SliceData(x), nb)
}

// dotBatch4 computes four dot products of one row with four activations when a 4-vector
// kernel exists for the weight type, reporting whether it did. The slices are checked by
// the caller.
func dotBatch4(weight Type, row []byte, xs *[4][]byte, nb int, out *[4]float32) bool {
	if !hasAVX2 || nb == 0 {
		return false
	}
	p := [4]*byte{unsafe.SliceData(xs[0]), unsafe.SliceData(xs[1]), unsafe.SliceData(xs[2]), unsafe.SliceData(xs[3])}
	switch weight {
	case Q8_0:
		dotQ8_0x4AVX2(unsafe.SliceData(row), &p, nb, out)
	case Q4_0:
		dotQ4_0x4AVX2(unsafe.SliceData(row), &p, nb, out)
	default:
		return false
	}
	return true
}
