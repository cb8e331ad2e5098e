#version 450
#define T_IQ2_XXS
#define MOE_BN 64
#define MOE_ROW_PAIRS
#include "moe_gemm_coopmat.glsl"
