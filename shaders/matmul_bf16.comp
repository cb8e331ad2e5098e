#version 450
#define T_BF16
#include "matmul.glsl"
