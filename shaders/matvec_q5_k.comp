#version 450
#define T_Q5_K
#define TN_TOKENS 1u
#include "matmul.glsl"
