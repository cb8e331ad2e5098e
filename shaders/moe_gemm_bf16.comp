#version 450
#define T_BF16
#include "moe_gemm.glsl"
