#version 450
#define T_Q3_K
#include "matvec_k.glsl"
