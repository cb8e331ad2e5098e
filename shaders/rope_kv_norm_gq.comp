#version 450
// rope_kv_norm_gq: rope_kv_norm.glsl with the queries read from the gated query projection.
#define GATED_Q
#include "rope_kv_norm.glsl"
