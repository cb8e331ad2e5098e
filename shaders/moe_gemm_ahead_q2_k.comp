#version 450
#define T_Q2_K
#include "moe_gemm_ahead.glsl"
