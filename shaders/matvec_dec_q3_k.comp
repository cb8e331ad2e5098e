#version 450
#define T_Q3_K
#define NR_ROWS 2u
#include "matvec_dec.glsl"
