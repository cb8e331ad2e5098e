#version 450
#define T_Q6_K
#define CM2_XH
#include "matmul_cm2.glsl"
