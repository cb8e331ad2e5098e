#version 450
#define T_Q4_K
#include "moe_down_x8.glsl"
