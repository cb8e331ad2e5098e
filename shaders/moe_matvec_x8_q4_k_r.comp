#version 450
// moe_matvec_x8_q4_k with ROUND_OUT: see moe_matvec_x8.glsl.
// Q4_K experts at one row of one pair a subgroup: on the H200's 30B-A3B decode 1.8% faster
// than two rows and 7% faster than four (docs/PERF.md, session 10)
#define T_Q4_K
#define NR_ROWS 1u
#define ROUND_OUT // rounds its output for the down products (moe_matvec_x8.glsl)
#include "moe_matvec_x8.glsl"
