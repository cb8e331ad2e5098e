#version 450
#define T_IQ3_XXS
#include "matmul_iq.glsl"
