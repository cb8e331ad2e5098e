#version 450
// delta_rule_fast_64_x8: delta_rule_fast.glsl for heads of 64, its output rounded for the int8 products (ROUND_X8).
#define S 64u
#define ROUND_X8
#include "delta_rule_fast.glsl"
