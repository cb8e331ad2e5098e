#version 450
// matvec_x8_q4_k (ROPE_KV) taking two of a lane's units a step, their loads issued together (X8_BATCH2; VKLLM_GPU_X8_BATCH2)
#define ROPE_KV
#define T_Q4_K
#define NR_ROWS 2u
#define X8_BATCH2
#include "matvec_x8.glsl"
