#version 450
#define T_MXFP4
#include "matmul_coopmat.glsl"
