#version 450
#define T_IQ2_S
#include "matmul_coopmat.glsl"
