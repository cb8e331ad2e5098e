#version 450
#define T_Q2_K
#include "dequant_f16.glsl"
