#version 450
// delta_rule_fast_64: delta_rule_fast.glsl for heads (state_size) of 64.
#define S 64u
#include "delta_rule_fast.glsl"
