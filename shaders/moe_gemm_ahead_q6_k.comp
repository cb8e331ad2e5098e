#version 450
#define T_Q6_K
#include "moe_gemm_ahead.glsl"
