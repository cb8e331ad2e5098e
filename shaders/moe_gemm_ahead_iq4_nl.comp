#version 450
#define T_IQ4_NL
#include "moe_gemm_ahead.glsl"
