#version 450
// moe_matvec_x8_q6_k rounding each pair's SwiGLU row for the down products in its last workgroup (ROUND_OUT: the gate and up products of a decode step)
#define T_Q6_K
#define ROUND_OUT
#include "moe_matvec_x8.glsl"
