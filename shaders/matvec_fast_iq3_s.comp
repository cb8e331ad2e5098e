#version 450
#define T_IQ3_S
#include "matvec_fast.glsl"
