#version 450
// moe_matvec_x8_q4_k rounding each pair's SwiGLU row for the down products in its last workgroup (ROUND_OUT: the gate and up products of a decode step)
#define T_Q4_K
#define NR_ROWS 1u
#define ROUND_OUT
#include "moe_matvec_x8.glsl"
