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
//	IQ4_NL  (32, 18)   d, nibbles as Q4_0                          x = d*kvalues_iq4nl[q]
//	IQ4_XS  (256, 136) d, uint16 scales_h, 4 bytes scales_l (6-bit ls per 32), nibbles;  x = d*(ls-32)*kvalues_iq4nl[q]
//	MXFP4   (32, 17)   E8M0 exponent e, nibbles                    x = 2^(e-127)*E2M1(q)
//	IQ2_XXS (256, 66)  d, per 32: 4 grid indices, 4×7 sign bits, 4-bit s;  x = d*(2s+1)/8*grid*sign
//	IQ2_XS  (256, 74)  d, uint16 (9-bit index, 7 sign bits) per 8, a 4-bit s per 16;  x as IQ2_XXS
//	IQ2_S   (256, 82)  d, 10-bit indices, 8 sign bits per 8, a 4-bit s per 16;  x as IQ2_XXS
//	IQ3_XXS (256, 98)  d, 8-bit index per 4, per 32: 4×7 sign bits and s;  x = d*(2s+1)/4*grid*sign
//	IQ3_S   (256, 110) d, 9-bit index per 4, 8 sign bits per 8, s per 32;  x = d*(2s+1)*grid*sign
//	IQ1_S   (256, 50)  d, 11-bit index per 8, per 32: 3-bit s and delta's sign;  x = d*(2s+1)*(grid ± 1/8)
//	IQ1_M   (256, 56)  11-bit index and delta sign per 8, 3-bit s per 16, d in the scales' top nibbles;  x as IQ1_S
//
// The i-quants' signs: where 7 sign bits are stored, the eighth makes the count of minus signs
// even. Their codebook grids (grids.go) are generated from GGML's ggml-common.h by gengrids.go;
// a test holds each grid, and the 16-value tables, to a checksum of the published source.
// IQ4_NL, IQ4_XS and MXFP4 have round-to-nearest quantizers, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS
// and IQ3_S an exhaustive nearest-grid-point one (no importance weights); IQ1_S and IQ1_M have
// none (Quantize refuses them). All of them have only pure Go kernels.
//
// The comments on the dequantize functions spell out which byte and bit hold each element.
//
// # Dot products
//
// DotF32 multiplies a row with a float vector, one dequantized block at a time. The fast path
// follows llama.cpp's CPU backend so that logits agree with it: the activation vector is
// quantized once per matrix-vector product (QuantizeActivation: Q8_0 for Q4_0/Q5_0/Q8_0, IQ4_NL
// and MXFP4 weights, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants, IQ4_XS and the grid i-quants,
// as llama.cpp's CPU backend pairs them; F16/BF16-rounded float32 for F16/BF16 weights), and
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
