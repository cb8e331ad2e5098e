#version 450
// matvec_x8_q5_k with ROPE_NORM: see matvec_x8.glsl.
#define T_Q5_K
#define NR_ROWS 2u
#define ROPE_NORM // finishes each query or key head as rope_kv_norm does (matvec_x8.glsl)
#include "matvec_x8.glsl"
