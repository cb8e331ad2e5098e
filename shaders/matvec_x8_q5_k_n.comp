#version 450
// matvec_x8_q5_k with ROUND_NEXT: see matvec_x8.glsl.
#define T_Q5_K
#define NR_ROWS 2u
#define ROUND_NEXT // rounds the residual for the next stage (matvec_x8.glsl)
#include "matvec_x8.glsl"
