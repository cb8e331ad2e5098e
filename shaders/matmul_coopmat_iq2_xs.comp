#version 450
#define T_IQ2_XS
#include "matmul_coopmat.glsl"
