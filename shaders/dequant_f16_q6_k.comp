#version 450
#define T_Q6_K
#include "dequant_f16.glsl"
