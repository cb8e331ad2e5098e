#version 450
#define T_IQ2_XXS
#define ROUND_IN
#include "moe_down_x8.glsl"
