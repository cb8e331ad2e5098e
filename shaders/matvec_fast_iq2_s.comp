#version 450
#define T_IQ2_S
#include "matvec_fast.glsl"
