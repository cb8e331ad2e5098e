// Package quant holds the GGML tensor types: their block layouts, dequantization, reference
// quantizers and the dot products the CPU forward pass uses.
//
// # Layouts
//
// Every type stores its elements in blocks (BlockSize elements, BlockBytes bytes); a row of n
// elements is n/BlockSize consecutive blocks. Scales are IEEE binary16 unless noted.
//
//	F32, F16, BF16  one element per "block"
//	Q8_0  (32, 34)   d, int8 q[32]                                  x = d*q
//	Q4_0  (32, 18)   d, 16 bytes: element j<16 low nibble of byte j, element j+16 its high nibble;  x = d*(q-8)
//	Q4_1  (32, 20)   d, m, nibbles as Q4_0                          x = d*q + m
//	Q5_0  (32, 22)   d, uint32 qh (bit j = bit 4 of element j), nibbles;  x = d*(q-16)
//	Q5_1  (32, 24)   d, m, qh, nibbles                              x = d*q + m
//	Q8_1  (32, 36)   d, s = d*sum(q), int8 q[32]                    (activation type)
//	Q2_K  (256, 84)  16 scale|min<<4 bytes, 64 bytes of 2-bit quants, d, dmin;  x = d*sc*q - dmin*m
//	Q3_K  (256, 110) 32 bytes high-bit mask, 64 bytes of 2-bit quants, 12 bytes of 16 six-bit scales, d;
//	                 x = d*(sc-32)*(q - (high bit clear ? 4 : 0))
//	Q4_K  (256, 144) d, dmin, 12 bytes of 8 six-bit scales and mins, 128 bytes of nibbles;  x = d*sc*q - dmin*m
//	Q5_K  (256, 176) as Q4_K plus 32 bytes of fifth bits
//	Q6_K  (256, 210) 128 bytes low nibbles, 64 bytes high 2-bit pairs, int8 scales[16], d;  x = d*sc*(q-32)
//	Q8_K  (256, 292) float32 d, int8 q[256], int16 sums of each 16 quants  (activation type)
//
// The comments on the dequantize functions spell out which byte and bit hold each element.
//
// # Dot products
//
// DotF32 multiplies a row with a float vector, one dequantized block at a time. The fast path
// follows llama.cpp's CPU backend so that logits agree with it: the activation vector is
// quantized once per matrix-vector product (QuantizeActivation: Q8_0 for Q4_0/Q5_0/Q8_0 weights,
// Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants, F16/BF16-rounded float32 for F16/BF16 weights), and
// DotQuantized sums integer products per block times the block scales. MatVec and
// MatVecQuantized run it over the rows of a matrix; DotQuantizedBatch multiplies one row with
// several activations (prompt tokens), decoding each weight block once. On amd64 CPUs with
// AVX2, FMA and F16C these run as assembly kernels (dot_amd64.s); the pure Go kernels are the
// fallback elsewhere, selectable with the build tag purego, and the tests hold the two to each
// other. Kernels reports which one runs.
//
// The quantizers (Quantize) are simple round-to-nearest ones meant for building test models;
// they do not search for error-minimising scales as llama.cpp's quantize tool does.
package quant
