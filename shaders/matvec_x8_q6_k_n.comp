#version 450
// matvec_x8_q6_k with ROUND_NEXT: see matvec_x8.glsl.
#define T_Q6_K
#define NR_ROWS 2u
#define ROUND_NEXT // rounds the residual for the next stage (matvec_x8.glsl)
#include "matvec_x8.glsl"
