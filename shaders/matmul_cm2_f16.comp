#version 450
#define T_F16
#define CM2_XH
#include "matmul_cm2.glsl"
