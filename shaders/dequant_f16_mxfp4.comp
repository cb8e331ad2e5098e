#version 450
#define T_MXFP4
#include "dequant_f16.glsl"
