#version 450
#define T_Q5_1
#include "moe_gemm_ahead.glsl"
