#version 450
#define T_IQ4_XS
#include "moe_gemm_ahead.glsl"
