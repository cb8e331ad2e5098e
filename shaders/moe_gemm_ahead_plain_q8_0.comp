#version 450
#define T_Q8_0
#define MOE_AHEAD_PLAIN
#include "moe_gemm_ahead.glsl"
