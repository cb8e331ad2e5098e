#version 450
#define T_IQ1_M
#include "matvec_fast.glsl"
