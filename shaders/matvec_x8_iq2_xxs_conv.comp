#version 450
// matvec_x8_iq2_xxs ending as ssm_conv does (CONV: the decode step's Gated DeltaNet qkv product)
#define CONV
#define T_IQ2_XXS
#define NR_ROWS 4u
#include "matvec_x8.glsl"
