#version 450
#define T_F16
#include "moe_gemm_ahead.glsl"
