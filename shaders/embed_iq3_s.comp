#version 450
#define T_IQ3_S
#include "embed_iq.glsl"
