#version 450
#define T_IQ3_XXS
#include "matvec_fast.glsl"
