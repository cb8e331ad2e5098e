#version 450
#define T_Q4_1
#define TN_TOKENS 1u
#include "matmul.glsl"
