#version 450
#define T_Q6_K
#include "matvec_fast.glsl"
