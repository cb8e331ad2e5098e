#version 450
// A candidate for BenchmarkCM2Tiles (coopmat_test.go), not used by the engine.
#define T_Q4_K
#define CM_XRAW
#define CM_PREFETCH_Q4K
#include "matmul_coopmat.glsl"
