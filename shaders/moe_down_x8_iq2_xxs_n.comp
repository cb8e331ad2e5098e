#version 450
// moe_down_x8_iq2_xxs with ROUND_NEXT: see moe_down_x8.glsl.
#define T_IQ2_XXS
#define ROUND_NEXT // rounds the residual for the next stage (moe_down_x8.glsl)
#include "moe_down_x8.glsl"
