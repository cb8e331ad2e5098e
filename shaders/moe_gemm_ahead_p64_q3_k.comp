#version 450
#define T_Q3_K
#define MOE_BN 64
#include "moe_gemm_ahead.glsl"
