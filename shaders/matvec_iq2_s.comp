#version 450
#define T_IQ2_S
#define TN_TOKENS 1u
#include "matmul_iq.glsl"
