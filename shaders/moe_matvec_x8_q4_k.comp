#version 450
// Q4_K experts at one row of one pair a subgroup: on the H200's 30B-A3B decode 1.8% faster
// than two rows and 7% faster than four (docs/PERF.md, session 10)
#define T_Q4_K
#define NR_ROWS 1u
#include "moe_matvec_x8.glsl"
