#version 450
#define T_Q4_K
#define MOE_AHEAD_PLAIN
#include "moe_gemm_ahead.glsl"
