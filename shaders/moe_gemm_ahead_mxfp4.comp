#version 450
#define T_MXFP4
#include "moe_gemm_ahead.glsl"
