#version 450
#define T_F32
#include "matvec_fast.glsl"
