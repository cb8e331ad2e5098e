#version 450
#define T_IQ3_S
#include "matmul_iq.glsl"
