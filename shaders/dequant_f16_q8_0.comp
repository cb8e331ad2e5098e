#version 450
#define T_Q8_0
#include "dequant_f16.glsl"
