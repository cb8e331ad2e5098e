#version 450
#define T_Q4_K
#include "dequant_f16.glsl"
