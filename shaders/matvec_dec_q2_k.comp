#version 450
#define T_Q2_K
#define NR_ROWS 2u
#include "matvec_dec.glsl"
