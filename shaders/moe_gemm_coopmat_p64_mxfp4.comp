#version 450
#define T_MXFP4
#define MOE_BN 64
#define MOE_ROW_PAIRS
#include "moe_gemm_coopmat.glsl"
