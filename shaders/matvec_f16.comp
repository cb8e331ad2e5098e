#version 450
#define T_F16
#define TN_TOKENS 1u
#include "matmul.glsl"
