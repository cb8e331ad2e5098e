#version 450
#define T_IQ4_NL
#include "matmul_coopmat.glsl"
