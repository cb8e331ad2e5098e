#version 450
#define T_IQ2_XXS
#include "matmul_iq.glsl"
