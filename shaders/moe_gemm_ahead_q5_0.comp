#version 450
#define T_Q5_0
#include "moe_gemm_ahead.glsl"
