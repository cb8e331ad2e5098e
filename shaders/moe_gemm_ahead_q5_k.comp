#version 450
#define T_Q5_K
#include "moe_gemm_ahead.glsl"
