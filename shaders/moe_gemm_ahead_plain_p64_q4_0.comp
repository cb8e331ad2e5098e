#version 450
#define T_Q4_0
#define MOE_BN 64
#define MOE_AHEAD_PLAIN
#include "moe_gemm_ahead.glsl"
