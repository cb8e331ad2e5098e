#version 450
#define T_Q4_K
#include "matmul_cm2.glsl"
