#version 450
#define T_Q2_K
#include "embed.glsl"
