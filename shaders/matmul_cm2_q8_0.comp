#version 450
#define T_Q8_0
#include "matmul_cm2.glsl"
