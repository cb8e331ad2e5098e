package vulkan

import (
	"fmt"

	"github.com/vkllm/vkllm/engine/quant"
)

// The exact GEMM tier: prefill products (more than one token) with Q4_0 and Q8_0 weights run
// as tiled integer-block GEMMs (shaders/matmul_exact.glsl) whose results are bit-identical to
// llama.cpp's CPU order, on every device. The fp16 cooperative-matrix tier is faster but
// rounds its inputs to fp16, and greedy output then parts from llama.cpp on near-ties; the
// shared-memory tier is exact but re-derives every activation block's Q8_0 integers for every
// weight row. Here a workgroup rounds the activations of its 32 tokens once per block and
// reuses them over 64 rows.

// Tile of one exact-GEMM workgroup (see shaders/matmul_exact.glsl).
const exactRows, exactTokens = 64, 32

// usesExactGEMM reports whether a matmul of m tokens with weights of type t runs on the exact
// GEMM: Q4_0 and Q8_0 prefill on the exact tier, and on the fast tier where no
// cooperative-matrix tier serves (the exact GEMM is then the fastest Q4_0/Q8_0 prefill there
// is: 9-10x the 8-token kernel on the H200). Decode, m = 1, keeps the matvec kernels.
func (c *Context) usesExactGEMM(t quant.Type, m int) bool {
	return m > 1 && llamaOrderTypes[t] && (c.exact || c.gemm != gemmCoopmat)
}

// fmaProbe is the push constant whose square is not a float (1 + 2^-11 + 2^-24): the shader
// takes fma() where fma(probe, probe, -probe²) sees that bit, i.e. where fma() is fused, and
// exact.glsl's emulation elsewhere. emulateFMA (a probe of 1, whose square is exact) forces
// the emulation, for tests on devices whose fma() is fused.
const (
	fmaProbe   = float32(1 + 1.0/4096)
	emulateFMA = float32(1)
)

// matMulExact records the exact-tier GEMM (see MatMul; shapes already checked).
func (s *Seq) matMulExact(t quant.Type, w, x, y Binding, k, n, m, xStride, yStride int, accumulate bool) {
	s.recordExactGEMM(t, w, x, y, k, n, m, xStride, yStride, accumulate, fmaProbe)
}

func (s *Seq) recordExactGEMM(t quant.Type, w, x, y Binding, k, n, m, xStride, yStride int, accumulate bool, probe float32) {
	suf, _ := weightSuffix(t)
	kern := s.kernel("matmul_exact_"+suf, 3, 28)
	if kern == nil {
		return
	}
	gx, gy := (n+exactRows-1)/exactRows, (m+exactTokens-1)/exactTokens
	if gx > maxGroups || gy > maxGroups {
		s.fail(fmt.Errorf("matmul %v: %d rows x %d tokens need %d x %d workgroups, over the %d per dimension every device supports",
			t, n, m, gx, gy, maxGroups))
		return
	}
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	s.Dispatch(kern, Push(uint32(k), uint32(n), uint32(m), uint32(xStride), uint32(yStride), acc, probe),
		uint32(gx), uint32(gy), 1, w, x, y)
}
