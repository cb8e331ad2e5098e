#version 450
#define T_IQ4_XS
#define TN_TOKENS 1u
#include "matmul_iq.glsl"
