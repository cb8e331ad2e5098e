#version 450
#define T_MXFP4
#include "embed_iq.glsl"
