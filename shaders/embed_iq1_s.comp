#version 450
#define T_IQ1_S
#include "embed_iq.glsl"
