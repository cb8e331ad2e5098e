#version 450
// matvec_x8_q4_kp ending as ssm_conv does (CONV: the decode step's Gated DeltaNet qkv product)
#define CONV
#define T_Q4_K
#define NR_ROWS 2u
#define Q4K_PAIRS
#include "matvec_x8.glsl"
