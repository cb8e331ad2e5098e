#version 450
// matvec_x8_q6_k with a lane taking 64 elements (16 of each quarter of a half superblock) a step (Q6K_WIDE)
#define Q6K_WIDE
#define T_Q6_K
#define NR_ROWS 2u
#include "matvec_x8.glsl"
