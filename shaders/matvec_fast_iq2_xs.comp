#version 450
#define T_IQ2_XS
#include "matvec_fast.glsl"
