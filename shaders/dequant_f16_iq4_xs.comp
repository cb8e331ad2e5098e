#version 450
#define T_IQ4_XS
#include "dequant_f16.glsl"
