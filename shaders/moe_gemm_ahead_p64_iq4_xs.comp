#version 450
#define T_IQ4_XS
#define MOE_BN 64
#include "moe_gemm_ahead.glsl"
