#version 450
// matvec_x8_q4_0_conv with each subgroup's run of blocks copied to shared memory in 16-byte words first (COOP_LOAD)
#define CONV
#define COOP_LOAD
#define T_Q4_0
#define NR_ROWS 4u
#include "matvec_x8.glsl"
