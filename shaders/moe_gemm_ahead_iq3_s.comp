#version 450
#define T_IQ3_S
#include "moe_gemm_ahead.glsl"
