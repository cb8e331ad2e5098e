#version 450
#define T_IQ2_XXS
#include "moe_gemm_ahead.glsl"
