#version 450
#define T_IQ3_XXS
#include "embed_iq.glsl"
