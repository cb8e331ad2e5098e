#version 450
#define T_F16
#include "matmul_cm2.glsl"
