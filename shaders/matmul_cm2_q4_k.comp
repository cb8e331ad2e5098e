#version 450
#define T_Q4_K
#define CM2_XH
#include "matmul_cm2.glsl"
