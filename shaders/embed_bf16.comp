#version 450
#define T_BF16
#include "embed.glsl"
