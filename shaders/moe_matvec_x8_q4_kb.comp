#version 450
// moe_matvec_x8_q4_k taking two of a lane's units a step, their loads issued together (X8_BATCH2; VKLLM_GPU_X8_BATCH2)
#define T_Q4_K
#define NR_ROWS 1u
#define X8_BATCH2
#include "moe_matvec_x8.glsl"
