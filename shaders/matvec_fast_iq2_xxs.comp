#version 450
#define T_IQ2_XXS
#include "matvec_fast.glsl"
