#version 450
// rope_kv_norm: see rope_kv_norm.glsl.
#include "rope_kv_norm.glsl"
