package vulkan

import "github.com/vkllm/vkllm/engine/quant"

// The i-quants and MXFP4 on the device. Their blocks are expanded by shaders/dequant_iq.glsl
// (the codebooks in shaders/iq_grids.glsl, generated from engine/quant's dequantizers), which
// dequant.glsl's dq32 hands to every kernel family: embed_<t>, the decode products matvec_<t>
// (exact tier) and matvec_fast_<t> (fast tier), and the prefill GEMMs matmul_<t>
// (shared-memory tier) and matmul_coopmat_<t> (cooperative-matrix tier).
//
// Numerics. dq32 reproduces engine/quant.Dequantize bit for bit. The activations are rounded
// first, on both tiers, by the quantact pass to what llama.cpp's CPU products pair these types
// with (quant.ActivationType: Q8_0 for IQ4_NL and MXFP4, Q8_K for the others; actMode picks
// it), so the GPU multiplies the same two factors the CPU reference does and differs from it
// only in the order and width of the sum: llama.cpp sums each block's integer products
// exactly and scales once per block, the kernels sum the f32 products of the dequantized
// weights and the rounded activations. The kernel tests (kernels_iq_test.go) hold every
// product to |gpu − ref| <= 1e-5·Σ|w·x| + 1e-6 of a float64 reference on the same rounded
// activations, and the fp16 tiles of the cooperative-matrix tier to its own bound.
//
// The codebooks are constant arrays in the shaders. A GPU serves them from its constant
// cache, which serializes lanes that read different entries; moving them to shared memory
// would need an initialization step in the kernels' main functions (matmul.glsl,
// matmul_coopmat.glsl), left for when the i-quant kernels are tuned on a GPU.
var iquantSuffix = map[quant.Type]string{
	quant.IQ4_NL:  "iq4_nl",
	quant.IQ4_XS:  "iq4_xs",
	quant.MXFP4:   "mxfp4",
	quant.IQ2_XXS: "iq2_xxs",
	quant.IQ2_XS:  "iq2_xs",
	quant.IQ2_S:   "iq2_s",
	quant.IQ3_XXS: "iq3_xxs",
	quant.IQ3_S:   "iq3_s",
	quant.IQ1_S:   "iq1_s",
	quant.IQ1_M:   "iq1_m",
}

// Every i-quant has a matvec_fast kernel (matvec_fast.glsl's T_IQUANT branch, 4 rows per
// subgroup pass as fastMatvecRows gives every type outside the K-quants).
func init() {
	for t := range iquantSuffix {
		fastMatvecTypes[t] = true
	}
}
