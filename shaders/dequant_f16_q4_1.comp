#version 450
#define T_Q4_1
#include "dequant_f16.glsl"
