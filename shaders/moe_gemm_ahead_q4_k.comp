#version 450
#define T_Q4_K
#include "moe_gemm_ahead.glsl"
