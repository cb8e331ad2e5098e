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
// The codebooks (up to 4 KiB, IQ1_S's) sit in shared memory in the embedding and product
// kernels, stored by four invocations at constant indices before the first dq32 (embed_iq.glsl,
// matmul_iq.glsl, matvec_fast.glsl): lavapipe turns a dynamically indexed constant array into
// a search over its entries at every access and took minutes to compile the larger grids
// that way. The cooperative-matrix GEMM (matmul_coopmat.glsl, which has no load step) reads
// them as constant arrays; it runs only on GPUs with that extension, whose compilers index
// constant data directly.
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
// subgroup pass as fastMatvecPass gives every type outside the K-quants).
func init() {
	for t := range iquantSuffix {
		fastMatvecTypes[t] = true
	}
}
