#version 450
#define T_Q3_K
#include "dequant_f16.glsl"
