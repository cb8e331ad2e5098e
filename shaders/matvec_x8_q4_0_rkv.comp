#version 450
// matvec_x8_q4_0 ending as rope_kv does (ROPE_KV: the decode step's query, key and value products)
#define ROPE_KV
#define T_Q4_0
#define NR_ROWS 4u
#include "matvec_x8.glsl"
