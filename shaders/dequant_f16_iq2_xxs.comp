#version 450
#define T_IQ2_XXS
#include "dequant_f16.glsl"
