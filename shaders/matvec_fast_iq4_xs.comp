#version 450
#define T_IQ4_XS
#include "matvec_fast.glsl"
