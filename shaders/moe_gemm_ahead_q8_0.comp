#version 450
#define T_Q8_0
#include "moe_gemm_ahead.glsl"
