#version 450
// matvec_x8_q4_kp ending as rope_kv does (ROPE_KV: the decode step's query, key and value products)
#define ROPE_KV
#define T_Q4_K
#define NR_ROWS 2u
#define Q4K_PAIRS
#include "matvec_x8.glsl"
