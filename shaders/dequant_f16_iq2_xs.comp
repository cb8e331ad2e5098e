#version 450
#define T_IQ2_XS
#include "dequant_f16.glsl"
