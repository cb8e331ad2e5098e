#version 450
// delta_rule_fast_128: delta_rule_fast.glsl for heads (state_size) of 128.
#define S 128u
#include "delta_rule_fast.glsl"
