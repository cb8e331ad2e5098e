#version 450
// an A/B candidate (VKLLM_GPU_MOE_ROWS): 1 rows of one pair a subgroup
#define T_Q4_K
#define NR_ROWS 1u
#include "moe_matvec_x8.glsl"
