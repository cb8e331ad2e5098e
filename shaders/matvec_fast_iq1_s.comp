#version 450
#define T_IQ1_S
#include "matvec_fast.glsl"
