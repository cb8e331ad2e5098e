#version 450
#define T_IQ1_M
#include "embed_iq.glsl"
