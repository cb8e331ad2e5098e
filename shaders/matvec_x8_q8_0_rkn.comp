#version 450
// matvec_x8_q8_0 with ROPE_NORM: see matvec_x8.glsl.
#define T_Q8_0
#define NR_ROWS 4u
#define ROPE_NORM // finishes each query or key head as rope_kv_norm does (matvec_x8.glsl)
#include "matvec_x8.glsl"
