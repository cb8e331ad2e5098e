#version 450
#define T_Q5_K
#include "matvec_fast.glsl"
