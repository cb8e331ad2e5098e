#version 450
#define T_F16
#include "matvec_fast.glsl"
