#version 450
#define T_Q8_0
#define MOE_BN 64
#define MOE_ROW_PAIRS
#include "moe_gemm_coopmat.glsl"
