#version 450
#define T_Q4_K
#include "moe_matvec_x8.glsl"
