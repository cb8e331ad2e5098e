#version 450
#define T_BF16
#define TN_TOKENS 1u
#include "matmul.glsl"
