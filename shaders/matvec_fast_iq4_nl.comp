#version 450
#define T_IQ4_NL
#include "matvec_fast.glsl"
