#version 450
#define T_MXFP4
#include "matvec_fast.glsl"
