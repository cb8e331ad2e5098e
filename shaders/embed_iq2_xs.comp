#version 450
#define T_IQ2_XS
#include "embed_iq.glsl"
