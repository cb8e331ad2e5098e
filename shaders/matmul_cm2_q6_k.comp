#version 450
#define T_Q6_K
#include "matmul_cm2.glsl"
