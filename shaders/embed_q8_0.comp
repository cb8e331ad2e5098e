#version 450
#define T_Q8_0
#include "embed.glsl"
