#version 450
#define T_IQ1_M
#define MOE_BN 64
#include "moe_gemm_ahead.glsl"
