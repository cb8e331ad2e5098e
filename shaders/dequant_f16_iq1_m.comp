#version 450
#define T_IQ1_M
#include "dequant_f16.glsl"
