#version 450
#define T_IQ3_S
#include "dequant_f16.glsl"
