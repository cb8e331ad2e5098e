#version 450
#define T_Q8_0
#define ROUND_IN
#include "moe_down_x8.glsl"
