#version 450
#define T_Q4_0
#include "dequant_f16.glsl"
