#version 450
#define T_Q4_1
#include "moe_gemm_ahead.glsl"
