#version 450
#define T_Q5_1
#include "dequant_f16.glsl"
