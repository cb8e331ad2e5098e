#version 450
// moe_down_x8_q8_0 with ROUND_NEXT: see moe_down_x8.glsl.
#define T_Q8_0
#define ROUND_NEXT // rounds the residual for the next stage (moe_down_x8.glsl)
#include "moe_down_x8.glsl"
