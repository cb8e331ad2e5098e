#version 450
#define T_F32
#include "moe_gemm.glsl"
