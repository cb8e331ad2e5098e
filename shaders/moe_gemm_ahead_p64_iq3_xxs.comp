#version 450
#define T_IQ3_XXS
#define MOE_BN 64
#include "moe_gemm_ahead.glsl"
