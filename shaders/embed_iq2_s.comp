#version 450
#define T_IQ2_S
#include "embed_iq.glsl"
