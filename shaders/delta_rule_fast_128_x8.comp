#version 450
// delta_rule_fast_128_x8: delta_rule_fast.glsl for heads of 128, its output rounded for the int8 products (ROUND_X8).
#define S 128u
#define ROUND_X8
#include "delta_rule_fast.glsl"
