#version 450
// matvec_x8_q5_k ending as rope_kv does (ROPE_KV: the decode step's query, key and value products)
#define ROPE_KV
#define T_Q5_K
#define NR_ROWS 2u
#include "matvec_x8.glsl"
