#version 450
#define T_Q6_K
#include "moe_matvec_x8.glsl"
