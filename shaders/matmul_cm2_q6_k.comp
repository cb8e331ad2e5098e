#version 450
#define T_Q6_K
#define CM2_XH
#define CM2_BM 64
#include "matmul_cm2.glsl"
