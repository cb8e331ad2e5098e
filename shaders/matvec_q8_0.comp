#version 450
#define T_Q8_0
#define TN_TOKENS 1u
#include "matmul.glsl"
