#version 450
#define T_MXFP4
#define TN_TOKENS 1u
#include "matmul_iq.glsl"
