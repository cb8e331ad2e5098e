#version 450
#define T_IQ2_S
#include "matmul_iq.glsl"
