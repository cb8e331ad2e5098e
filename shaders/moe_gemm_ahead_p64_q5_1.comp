#version 450
#define T_Q5_1
#define MOE_BN 64
#include "moe_gemm_ahead.glsl"
