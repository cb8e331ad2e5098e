#version 450
// matvec_x8_q8_0 ending as ssm_conv does (CONV: the decode step's Gated DeltaNet qkv product)
#define CONV
#define T_Q8_0
#define NR_ROWS 4u
#include "matvec_x8.glsl"
