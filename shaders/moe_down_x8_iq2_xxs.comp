#version 450
#define T_IQ2_XXS
#include "moe_down_x8.glsl"
