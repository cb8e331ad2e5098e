#version 450
// moe_matvec_x8_q4_k choosing the token's experts itself (ROUTE_INSIDE: the gate and up products of a decode step)
#define T_Q4_K
#define NR_ROWS 1u
#define ROUTE_INSIDE
#include "moe_matvec_x8.glsl"
