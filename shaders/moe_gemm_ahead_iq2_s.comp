#version 450
#define T_IQ2_S
#include "moe_gemm_ahead.glsl"
