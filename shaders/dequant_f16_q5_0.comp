#version 450
#define T_Q5_0
#include "dequant_f16.glsl"
