#version 450
#define T_Q2_K
#include "matvec_k.glsl"
