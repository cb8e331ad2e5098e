#version 450
#define T_Q6_K
#include "moe_down_x8.glsl"
