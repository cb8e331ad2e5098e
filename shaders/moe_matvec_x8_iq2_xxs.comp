#version 450
#define T_IQ2_XXS
#include "moe_matvec_x8.glsl"
