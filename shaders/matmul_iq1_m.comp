#version 450
#define T_IQ1_M
#include "matmul_iq.glsl"
