#version 450
#define T_IQ3_XXS
#include "moe_gemm_ahead.glsl"
