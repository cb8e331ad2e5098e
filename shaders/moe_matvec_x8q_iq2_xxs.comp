#version 450
// moe_matvec_x8_iq2_xxs rounding each pair's SwiGLU row for the down products in its last workgroup (ROUND_OUT: the gate and up products of a decode step)
#define T_IQ2_XXS
#define ROUND_OUT
#include "moe_matvec_x8.glsl"
