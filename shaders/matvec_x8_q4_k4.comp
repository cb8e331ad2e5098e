#version 450
#define T_Q4_K
#define NR_ROWS 4u
#include "matvec_x8.glsl"
