#version 450
#define T_Q5_K
#include "moe_matvec_x8.glsl"
