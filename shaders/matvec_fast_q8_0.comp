#version 450
#define T_Q8_0
#include "matvec_fast.glsl"
