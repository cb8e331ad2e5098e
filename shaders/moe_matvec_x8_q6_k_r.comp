#version 450
// moe_matvec_x8_q6_k with ROUND_OUT: see moe_matvec_x8.glsl.
#define T_Q6_K
#define ROUND_OUT // rounds its output for the down products (moe_matvec_x8.glsl)
#include "moe_matvec_x8.glsl"
