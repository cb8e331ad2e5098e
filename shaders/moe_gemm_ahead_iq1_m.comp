#version 450
#define T_IQ1_M
#include "moe_gemm_ahead.glsl"
