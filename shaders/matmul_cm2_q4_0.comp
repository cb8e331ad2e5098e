#version 450
#define T_Q4_0
#include "matmul_cm2.glsl"
