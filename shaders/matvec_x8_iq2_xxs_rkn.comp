#version 450
// matvec_x8_iq2_xxs with ROPE_NORM: see matvec_x8.glsl.
#define T_IQ2_XXS
#define NR_ROWS 4u
#define ROPE_NORM // finishes each query or key head as rope_kv_norm does (matvec_x8.glsl)
#include "matvec_x8.glsl"
