#version 450
#define T_IQ1_S
#include "matmul_iq.glsl"
