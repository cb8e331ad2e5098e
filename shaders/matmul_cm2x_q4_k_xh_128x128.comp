#version 450
// A candidate for BenchmarkCM2Tiles (coopmat_test.go), not used by the engine: 128x128 tiles.
#define T_Q4_K
#define CM2_XH
#include "matmul_cm2.glsl"
