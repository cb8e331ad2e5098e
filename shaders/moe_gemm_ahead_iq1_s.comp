#version 450
#define T_IQ1_S
#include "moe_gemm_ahead.glsl"
