#version 450
#define T_MXFP4
#define MOE_AHEAD_PLAIN
#include "moe_gemm_ahead.glsl"
