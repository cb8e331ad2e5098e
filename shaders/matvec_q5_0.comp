#version 450
#define T_Q5_0
#define TN_TOKENS 1u
#include "matmul.glsl"
