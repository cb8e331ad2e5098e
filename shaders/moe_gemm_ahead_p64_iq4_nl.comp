#version 450
#define T_IQ4_NL
#define MOE_BN 64
#include "moe_gemm_ahead.glsl"
