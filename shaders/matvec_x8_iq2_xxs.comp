#version 450
#define T_IQ2_XXS
#define NR_ROWS 4u
#include "matvec_x8.glsl"
