#version 450
#define T_Q4_0
#define ROUND_IN
#include "moe_down_x8.glsl"
