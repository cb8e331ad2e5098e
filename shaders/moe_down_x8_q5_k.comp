#version 450
#define T_Q5_K
#include "moe_down_x8.glsl"
