#version 450
#define T_IQ3_XXS
#include "dequant_f16.glsl"
