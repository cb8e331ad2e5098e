#version 450
#define T_Q5_K
#define MOE_BN 64
#include "moe_gemm_ahead.glsl"
