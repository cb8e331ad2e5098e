#version 450
#define T_Q4_0
#define CM2_XH
#include "matmul_cm2.glsl"
