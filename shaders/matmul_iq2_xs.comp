#version 450
#define T_IQ2_XS
#include "matmul_iq.glsl"
