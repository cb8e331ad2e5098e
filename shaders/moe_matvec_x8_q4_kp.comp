#version 450
// moe_matvec_x8_q4_k with a lane taking two sub-blocks that share their header and quants (Q4K_PAIRS; VKLLM_GPU_Q4K_PAIRS_MIN_K)
#define T_Q4_K
#define NR_ROWS 1u
#define Q4K_PAIRS
#include "moe_matvec_x8.glsl"
