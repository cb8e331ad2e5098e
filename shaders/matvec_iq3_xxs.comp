#version 450
#define T_IQ3_XXS
#define TN_TOKENS 1u
#include "matmul_iq.glsl"
