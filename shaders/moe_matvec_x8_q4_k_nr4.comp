#version 450
// an A/B candidate (VKLLM_GPU_MOE_ROWS): 4 rows of one pair a subgroup
#define T_Q4_K
#define NR_ROWS 4u
#include "moe_matvec_x8.glsl"
