#version 450
// A candidate for BenchmarkCM2Tiles (coopmat_test.go), not used by the engine.
#define T_Q4_K
#define CM2_XH
#define CM2_BM 256
#include "matmul_cm2.glsl"
