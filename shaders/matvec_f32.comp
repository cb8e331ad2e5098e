#version 450
#define T_F32
#define TN_TOKENS 1u
#include "matmul.glsl"
