// dequant_blocks.glsl: the block size (elements) and bytes of the one weight type the including
// shader defines (see dequant.glsl, which includes it). A shader that sizes shared memory by
// them includes this file before declaring `w` and including dequant.glsl.
#ifndef DEQUANT_BLOCKS_GLSL
#define DEQUANT_BLOCKS_GLSL
#if defined(T_F32)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 128u;
#elif defined(T_F16)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 64u;
#elif defined(T_BF16)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 64u; // 32 bfloat16 values a unit
#elif defined(T_Q4_0)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 18u;
#elif defined(T_Q4_1)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 20u;
#elif defined(T_Q5_0)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 22u;
#elif defined(T_Q5_1)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 24u;
#elif defined(T_Q8_0)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 34u;
#elif defined(T_Q2_K)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 84u;
#elif defined(T_Q3_K)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 110u;
#elif defined(T_Q4_K)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 144u;
#elif defined(T_Q5_K)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 176u;
#elif defined(T_Q6_K)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 210u;
#elif defined(T_IQ4_NL)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 18u;
#elif defined(T_MXFP4)
const uint BLOCK_ELEMS = 32u; const uint BLOCK_BYTES = 17u;
#elif defined(T_IQ4_XS)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 136u;
#elif defined(T_IQ2_XXS)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 66u;
#elif defined(T_IQ2_XS)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 74u;
#elif defined(T_IQ2_S)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 82u;
#elif defined(T_IQ3_XXS)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 98u;
#elif defined(T_IQ3_S)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 110u;
#elif defined(T_IQ1_S)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 50u;
#elif defined(T_IQ1_M)
const uint BLOCK_ELEMS = 256u; const uint BLOCK_BYTES = 56u;
#else
#error "define a weight type"
#endif

const uint UNITS_PER_BLOCK = BLOCK_ELEMS / 32u;
#endif
