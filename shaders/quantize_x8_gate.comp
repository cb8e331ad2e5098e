#version 450
// quantize_x8_gate: quantize_x8.glsl with F_GATE, the gated attention's output gate.
#define GATE
#include "quantize_x8.glsl"
