#version 450
#define T_IQ4_NL
#include "dequant_f16.glsl"
