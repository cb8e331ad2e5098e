#version 450
#define T_MXFP4
#include "matmul_iq.glsl"
