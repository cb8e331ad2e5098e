#version 450
#define T_Q3_K
#include "matmul.glsl"
