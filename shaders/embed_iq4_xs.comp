#version 450
#define T_IQ4_XS
#include "embed_iq.glsl"
