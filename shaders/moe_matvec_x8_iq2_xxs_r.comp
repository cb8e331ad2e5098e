#version 450
// moe_matvec_x8_iq2_xxs with ROUND_OUT: see moe_matvec_x8.glsl.
#define T_IQ2_XXS
#define ROUND_OUT // rounds its output for the down products (moe_matvec_x8.glsl)
#include "moe_matvec_x8.glsl"
