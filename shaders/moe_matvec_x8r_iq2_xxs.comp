#version 450
// moe_matvec_x8_iq2_xxs choosing the token's experts itself (ROUTE_INSIDE: the gate and up products of a decode step)
#define T_IQ2_XXS
#define ROUTE_INSIDE
#include "moe_matvec_x8.glsl"
