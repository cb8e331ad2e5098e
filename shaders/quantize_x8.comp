#version 450
// quantize_x8: see quantize_x8.glsl.
#include "quantize_x8.glsl"
