#version 450
// matvec_x8_iq2_xxs with ROUND_NEXT: see matvec_x8.glsl.
#define T_IQ2_XXS
#define NR_ROWS 4u
#define ROUND_NEXT // rounds the residual for the next stage (matvec_x8.glsl)
#include "matvec_x8.glsl"
