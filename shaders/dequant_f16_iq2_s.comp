#version 450
#define T_IQ2_S
#include "dequant_f16.glsl"
