#version 450
// moe_matvec_x8_q8_0 choosing the token's experts itself (ROUTE_INSIDE: the gate and up products of a decode step)
#define T_Q8_0
#define ROUTE_INSIDE
#include "moe_matvec_x8.glsl"
