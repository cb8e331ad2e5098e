#version 450
// moe_matvec_x8_q5_k with ROUND_OUT: see moe_matvec_x8.glsl.
#define T_Q5_K
#define ROUND_OUT // rounds its output for the down products (moe_matvec_x8.glsl)
#include "moe_matvec_x8.glsl"
