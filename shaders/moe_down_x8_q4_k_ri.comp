#version 450
#define T_Q4_K
#define ROUND_IN
#include "moe_down_x8.glsl"
