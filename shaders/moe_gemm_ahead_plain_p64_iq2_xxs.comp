#version 450
#define T_IQ2_XXS
#define MOE_BN 64
#define MOE_AHEAD_PLAIN
#include "moe_gemm_ahead.glsl"
