#version 450
#define T_Q5_K
#define CM2_XH
#include "matmul_cm2.glsl"
