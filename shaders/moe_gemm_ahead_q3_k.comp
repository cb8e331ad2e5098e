#version 450
#define T_Q3_K
#include "moe_gemm_ahead.glsl"
