#version 450
#define T_Q8_0
#define NR_ROWS 4u
#include "matvec_x8.glsl"
