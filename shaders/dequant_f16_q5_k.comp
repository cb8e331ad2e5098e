#version 450
#define T_Q5_K
#include "dequant_f16.glsl"
