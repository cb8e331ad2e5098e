#version 450
// matvec_x8_q4_0 with ROUND_NEXT: see matvec_x8.glsl.
#define T_Q4_0
#define NR_ROWS 4u
#define ROUND_NEXT // rounds the residual for the next stage (matvec_x8.glsl)
#include "matvec_x8.glsl"
