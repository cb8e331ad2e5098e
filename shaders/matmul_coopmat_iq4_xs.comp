#version 450
#define T_IQ4_XS
#include "matmul_coopmat.glsl"
