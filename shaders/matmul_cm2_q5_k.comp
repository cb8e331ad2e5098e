#version 450
#define T_Q5_K
#include "matmul_cm2.glsl"
