#version 450
#define T_Q4_K
#define TN_TOKENS 1u
#include "matmul.glsl"
