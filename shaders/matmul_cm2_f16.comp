#version 450
#define T_F16
#define CM2_XH
#define CM2_BM 64
#include "matmul_cm2.glsl"
