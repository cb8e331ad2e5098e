#version 450
#define T_IQ2_S
#define MOE_BN 64
#include "moe_gemm_ahead.glsl"
