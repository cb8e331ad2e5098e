#version 450
#define T_Q4_0
#include "moe_gemm_ahead.glsl"
