#version 450
#define T_Q4_K
#include "matvec_fast.glsl"
