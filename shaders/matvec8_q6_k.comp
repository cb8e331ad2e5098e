#version 450
#define T_Q6_K
#define TN_TOKENS 8u
#include "matvec_k.glsl"
