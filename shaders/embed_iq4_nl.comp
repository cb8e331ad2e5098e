#version 450
#define T_IQ4_NL
#include "embed_iq.glsl"
