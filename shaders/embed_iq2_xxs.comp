#version 450
#define T_IQ2_XXS
#include "embed_iq.glsl"
