#version 450
#define T_IQ2_XS
#include "moe_gemm_ahead.glsl"
