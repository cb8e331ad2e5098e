#version 450
#define T_Q6_K
#define ROUND_IN
#include "moe_down_x8.glsl"
