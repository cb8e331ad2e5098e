#version 450
#define T_Q6_K
#define NR_ROWS 2u
#include "matvec_x8.glsl"
