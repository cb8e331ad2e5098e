#version 450
#define T_IQ1_S
#include "dequant_f16.glsl"
